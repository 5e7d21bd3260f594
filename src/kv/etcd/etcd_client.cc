#include "kv/etcd/etcd_client.h"

#include <algorithm>
#include <fstream>
#include <sstream>

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

namespace {

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument("cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

Result<std::shared_ptr<Client>> Client::create(EtcdOptions options) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!options.ca_file.empty() || !options.cert_file.empty()) {
    grpc::SslCredentialsOptions ssl;
    if (!options.ca_file.empty()) {
      KVQ_ASSIGN_OR_RETURN(ssl.pem_root_certs, read_file(options.ca_file));
    }
    if (!options.cert_file.empty()) {
      KVQ_ASSIGN_OR_RETURN(ssl.pem_cert_chain, read_file(options.cert_file));
      KVQ_ASSIGN_OR_RETURN(ssl.pem_private_key, read_file(options.key_file));
    }
    credentials = grpc::SslCredentials(ssl);
  }
  return std::make_shared<Client>(std::move(options), std::move(credentials));
}

Client::Client(EtcdOptions options, std::shared_ptr<grpc::ChannelCredentials> credentials)
    : options_(std::move(options)), credentials_(std::move(credentials)) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 * 1024 * 1024);  // gRPC's 4 MiB default is below large ranges
  for (const auto& endpoint : options_.endpoints) {
    auto channel = grpc::CreateCustomChannel(endpoint, credentials_, args);
    kv_.push_back(etcdserverpb::KV::NewStub(channel));
    channels_.push_back(std::move(channel));
  }
}

std::shared_ptr<grpc::Channel> Client::channel() { return channels_[current_.load() % channels_.size()]; }

void Client::fail_over(size_t index) {
  size_t expected = index;
  current_.compare_exchange_strong(expected, (index + 1) % channels_.size());
}

Status Client::authenticate(size_t index) {
  auto stub = etcdserverpb::Auth::NewStub(channels_[index]);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + options_.request_timeout);
  etcdserverpb::AuthenticateRequest request;
  request.set_name(options_.username);
  request.set_password(options_.password);
  etcdserverpb::AuthenticateResponse response;
  grpc::Status status = stub->Authenticate(&context, request, &response);
  if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ||
      status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
    return FailedPrecondition("etcd refused user '" + options_.username + "': " + status.error_message());
  }
  if (!status.ok()) return from_grpc(status, false);
  std::lock_guard lock(token_mu_);
  token_ = response.token();
  return Status::OK();
}

Status Client::authorize(grpc::ClientContext& context) {
  if (options_.username.empty()) return Status::OK();
  std::string token;
  {
    std::lock_guard lock(token_mu_);
    token = token_;
  }
  if (token.empty()) {
    KVQ_RETURN_IF_ERROR(authenticate(current_.load() % channels_.size()));
    std::lock_guard lock(token_mu_);
    token = token_;
  }
  context.AddMetadata("token", token);
  return Status::OK();
}

template <typename Call>
Status Client::call(bool commit, Call&& fn) {
  const size_t index = current_.load() % channels_.size();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + options_.request_timeout);
  KVQ_RETURN_IF_ERROR(authorize(context));
  grpc::Status status = fn(*kv_[index], context);
  if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
    // The token expired (etcd's simple tokens do): fetch another on the next call.
    std::lock_guard lock(token_mu_);
    token_.clear();
    return Unavailable("etcd: " + status.error_message() + " (re-authenticating)");
  }
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
  auto writes = [](const auto& ops) {
    return std::any_of(ops.begin(), ops.end(), [](const etcdserverpb::RequestOp& op) { return !op.has_request_range(); });
  };
  const bool commit = writes(request.success()) || writes(request.failure());
  return call(commit, [&](etcdserverpb::KV::Stub& stub, grpc::ClientContext& context) {
    return stub.Txn(&context, request, response);
  });
}

}  // namespace kvq::kv::etcd
