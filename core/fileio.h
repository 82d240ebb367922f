// Atomic file output (temp file, fsync, rename), the clean-up of temp files that dead writers left, directory creation.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace octet {

// A file written under a temporary name (path.tmp.<host>.<pid>) and renamed over path by commit(): readers see the
// old file or the complete new one, never a partial one. Destroyed uncommitted (an error), it removes the temp file.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void write(const void* data, size_t size);  // errors (a full disk) name the path and the bytes written so far
  void commit();                              // fsync, rename, fsync the folder
  size_t written() const { return written_; }

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  size_t written_ = 0;
};

// Writes bytes to path through an AtomicFile.
void write_file_atomic(const std::string& path, const void* data, size_t size);
inline void write_file_atomic(const std::string& path, const std::string& text) {
  write_file_atomic(path, text.data(), text.size());
}
// Removes the "<name>.tmp.<host>.<pid>" files in dir whose writer on this host is no longer running (a process killed
// while it wrote); returns their names.
std::vector<std::string> remove_orphan_temps(const std::string& dir);
// A run directory's lock: an fcntl write lock on DIR/run.lock, whose text names the holder ("pid 123 host node7 since
// 2026-11-26T12:00:00Z"). The kernel drops the lock when its process ends however it ends (SIGKILL, a lost node's
// NFS lease), so a lock file left behind is stale when nobody holds its lock: the next run takes it over and says so
// (stale_holder()). The folder is created if missing and, when the lock is released with the folder still empty but
// for the lock, removed again with the parents it created (a start-up that failed leaves nothing). Throws naming the
// holder when it is held.
class DirLock {
 public:
  explicit DirLock(const std::string& dir);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  const std::string& stale_holder() const { return stale_; }  // the text of a stale lock taken over ("" if none)
  static constexpr const char* kName = "run.lock";

 private:
  void release();  // the lock file and the folders made for it (the destructor, and a constructor that fails)
  std::string dir_, path_, stale_;
  int fd_ = -1;
  std::vector<std::string> made_;  // the folders this lock created, deepest first
};

std::string read_file(const std::string& path);
void make_dirs(const std::string& path);  // mkdir -p
bool path_exists(const std::string& path);
std::string parent_dir(const std::string& path);  // "a/b" -> "a", "b" -> ".", "/b" -> "/"
int64_t file_size(const std::string& path);       // bytes; -1 when it cannot be read
bool is_dir(const std::string& path);
bool same_file(const std::string& a, const std::string& b);  // both exist and are the same file or folder
void remove_file(const std::string& path);                   // absent is fine; other failures throw
double peak_rss_mb();                                        // this process's peak resident set

}  // namespace octet
