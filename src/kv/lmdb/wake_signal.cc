#include "kv/lmdb/wake_signal.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>

namespace kvq::kv::lmdb {

// The words sit on cache lines of their own: committers write one, waiters the other.
struct WakeSignal::Shared {
  alignas(64) std::atomic<uint32_t> sequence;
  alignas(64) std::atomic<uint32_t> waiters;
};

namespace {

constexpr size_t kFileSize = 4096;
static_assert(std::atomic<uint32_t>::is_always_lock_free,
              "a futex word must be a plain 32-bit word");

// Not FUTEX_PRIVATE_FLAG: the word is in a MAP_SHARED file mapping and the waiters are in other
// processes; the kernel keys a shared futex by the file page, not the address.
long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

Status errno_status(const std::string& what) {
  return Unavailable(what + ": " + std::strerror(errno));
}

}  // namespace

Result<std::unique_ptr<WakeSignal>> WakeSignal::open(const std::string& dir) {
  static_assert(sizeof(Shared) <= kFileSize);
  const std::string path = dir + "/kvq-wake";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return errno_status("opening '" + path + "'");
  struct stat st {};
  // Extending is all anyone does to the file, so two processes creating it at once agree.
  if (fstat(fd, &st) != 0 ||
      (st.st_size < static_cast<off_t>(kFileSize) && ftruncate(fd, kFileSize) != 0)) {
    Status s = errno_status("sizing '" + path + "'");
    ::close(fd);
    return s;
  }
  void* map = mmap(nullptr, kFileSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    Status s = errno_status("mapping '" + path + "'");
    ::close(fd);
    return s;
  }
  auto* shared = static_cast<Shared*>(map);
  // Alone with the file: no thread can be waiting, so a count left by a killed process goes. The
  // shared lock held from then on (released by the kernel however the process ends) tells later
  // openers they are not alone.
  if (flock(fd, LOCK_EX | LOCK_NB) == 0) shared->waiters.store(0);
  flock(fd, LOCK_SH);
  return std::unique_ptr<WakeSignal>(new WakeSignal(fd, shared));
}

WakeSignal::~WakeSignal() {
  munmap(shared_, kFileSize);
  ::close(fd_);
}

void WakeSignal::notify() {
  shared_->sequence.fetch_add(1);
  uint32_t others;
  {
    util::MutexLock lock(mu_);
    others = shared_->waiters.load() - static_cast<uint32_t>(own_waiters_);
  }
  if (others > 0) wake_all();
}

uint32_t WakeSignal::sequence() const { return shared_->sequence.load(); }

uint32_t WakeSignal::waiters() const { return shared_->waiters.load(); }

void WakeSignal::wait(uint32_t seen, std::chrono::milliseconds timeout) {
  {
    util::MutexLock lock(mu_);
    shared_->waiters.fetch_add(1);
    ++own_waiters_;
  }
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(timeout);
  const timespec relative{static_cast<time_t>(s.count()),
                          static_cast<long>(std::chrono::nanoseconds(timeout - s).count())};
  // EAGAIN (the word moved already), EINTR and ETIMEDOUT all mean "look again".
  futex(&shared_->sequence, FUTEX_WAIT, seen, &relative);
  util::MutexLock lock(mu_);
  shared_->waiters.fetch_sub(1);
  --own_waiters_;
}

void WakeSignal::interrupt() {
  shared_->sequence.fetch_add(1);
  wake_all();
}

void WakeSignal::wake_all() { futex(&shared_->sequence, FUTEX_WAKE, INT_MAX, nullptr); }

}  // namespace kvq::kv::lmdb
