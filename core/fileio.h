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
