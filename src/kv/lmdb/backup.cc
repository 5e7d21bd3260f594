// kv/lmdb/backup.cc — backup_lmdb_store (kvq/lmdb_store.h): a consistent copy of a data
// directory, written aside and renamed into place once it is on disk.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "kv/lmdb/lmdb_env.h"
#include "kvq/lmdb_store.h"

namespace kvq {
namespace {

namespace fs = std::filesystem;

constexpr char kDataFile[] = "data.mdb";
constexpr char kPartialFile[] = "data.mdb.partial";

Status io_error(const std::string& what) { return Internal(what + ": " + std::strerror(errno)); }

Status sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return io_error("opening '" + dir.string() + "'");
  const int rc = ::fsync(fd);
  ::close(fd);
  return rc == 0 ? Status::OK() : io_error("syncing '" + dir.string() + "'");
}

// A new or empty directory; creates it (and syncs its parent, so that it survives a crash).
Status prepare_destination(const fs::path& destination) {
  std::error_code ec;
  if (!fs::exists(destination, ec)) {
    fs::create_directories(destination, ec);
    if (ec)
      return InvalidArgument("cannot create backup directory '" + destination.string() +
                             "': " + ec.message());
    return sync_directory(fs::absolute(destination, ec).parent_path());
  }
  if (!fs::is_directory(destination, ec)) {
    return InvalidArgument("backup destination '" + destination.string() + "' is not a directory");
  }
  if (!fs::is_empty(destination, ec) || ec) {
    return InvalidArgument("backup destination '" + destination.string() +
                           "' is not empty: a backup goes into a new or empty directory");
  }
  return Status::OK();
}

// Copies into `partial`, syncs it and renames it to `final_file`. Returns the copy's size.
Result<uint64_t> write_copy(const std::string& data_dir, const fs::path& partial,
                            const fs::path& final_file, bool compact) {
  const int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("creating '" + partial.string() + "'");
  Status status = kv::lmdb::Env::copy_directory(data_dir, fd, compact);
  struct stat written {};
  if (status.ok() && ::fstat(fd, &written) != 0)
    status = io_error("reading the size of '" + partial.string() + "'");
  if (status.ok() && ::fsync(fd) != 0) status = io_error("syncing '" + partial.string() + "'");
  if (::close(fd) != 0 && status.ok()) status = io_error("closing '" + partial.string() + "'");
  if (status.ok() && ::rename(partial.c_str(), final_file.c_str()) != 0) {
    status = io_error("renaming '" + partial.string() + "' to '" + final_file.string() + "'");
  }
  if (!status.ok()) return status;
  return static_cast<uint64_t>(written.st_size);
}

}  // namespace

Result<uint64_t> backup_lmdb_store(const std::string& data_dir, const std::string& destination,
                                   const LmdbBackupOptions& options) {
  if (data_dir.empty()) return InvalidArgument("the data directory path is empty");
  if (destination.empty()) return InvalidArgument("the backup destination path is empty");
  std::error_code ec;
  if (!fs::is_regular_file(fs::path(data_dir) / kDataFile, ec)) {
    return NotFound("no kvq data directory at '" + data_dir + "' (it holds no " + kDataFile + ")");
  }
  const fs::path dir(destination);
  KVQ_RETURN_IF_ERROR(prepare_destination(dir));
  const fs::path partial = dir / kPartialFile;
  const fs::path final_file = dir / kDataFile;
  auto size = write_copy(data_dir, partial, final_file, options.compact);
  Status status = size.status();
  if (status.ok()) status = sync_directory(dir);
  if (!status.ok()) {
    // Nothing is left that could pass for a backup.
    fs::remove(partial, ec);
    fs::remove(final_file, ec);
    return status;
  }
  return *size;
}

}  // namespace kvq
