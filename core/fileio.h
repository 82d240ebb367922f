// Atomic file output (temp file, fsync, rename) and directory creation.
#pragma once
#include <string>

namespace octet {

// Writes bytes to path so that readers see either the old file or the complete new one, never a partial one.
void write_file_atomic(const std::string& path, const void* data, size_t size);
inline void write_file_atomic(const std::string& path, const std::string& text) { write_file_atomic(path, text.data(), text.size()); }
std::string read_file(const std::string& path);
void make_dirs(const std::string& path);  // mkdir -p
bool path_exists(const std::string& path);
bool is_dir(const std::string& path);
double peak_rss_mb();  // this process's peak resident set

}  // namespace octet
