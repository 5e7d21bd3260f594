#include "kv/etcd/etcd_client.h"

namespace kvq::kv::etcd {

Status from_grpc(const grpc::Status& status, bool commit) {
  const std::string message = "etcd: " + status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::OK: return Status::OK();
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::ABORTED:
      // The request was sent; for a commit nobody can say whether it applied.
      return commit ? UnknownResult(message) : Unavailable(message);
    case grpc::StatusCode::OUT_OF_RANGE:
      return Aborted(message + " (the read revision was compacted; retry the transaction)");
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return InvalidArgument(message);
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return ResourceExhausted(message);
    default: return Unavailable(message);
  }
}

Client::Client(EtcdOptions options) : options_(std::move(options)) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 * 1024 * 1024);  // gRPC's 4 MiB default is below large ranges
  for (const auto& endpoint : options_.endpoints) {
    auto channel = grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), args);
    kv_.push_back(etcdserverpb::KV::NewStub(channel));
    channels_.push_back(std::move(channel));
  }
}

std::shared_ptr<grpc::Channel> Client::channel() { return channels_[current_.load() % channels_.size()]; }

void Client::fail_over(size_t index) {
  size_t expected = index;
  current_.compare_exchange_strong(expected, (index + 1) % channels_.size());
}

template <typename Call>
Status Client::call(bool commit, Call&& fn) {
  const size_t index = current_.load() % channels_.size();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + options_.request_timeout);
  grpc::Status status = fn(*kv_[index], context);
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
      status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    fail_over(index);
  }
  return from_grpc(status, commit);
}

Status Client::range(const etcdserverpb::RangeRequest& request, etcdserverpb::RangeResponse* response) {
  return call(false, [&](etcdserverpb::KV::Stub& stub, grpc::ClientContext& context) {
    return stub.Range(&context, request, response);
  });
}

Status Client::txn(const etcdserverpb::TxnRequest& request, etcdserverpb::TxnResponse* response) {
  return call(true, [&](etcdserverpb::KV::Stub& stub, grpc::ClientContext& context) {
    return stub.Txn(&context, request, response);
  });
}

}  // namespace kvq::kv::etcd
