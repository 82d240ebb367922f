// Implementation of core/fileio.h with POSIX calls.
#include "core/fileio.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace octet {

namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  std::string h = buf;
  for (char& c : h)
    if (c == '/' || c == '.') c = '_';  // one path component, and ".tmp.<host>.<pid>" stays parseable
  return h;
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  tmp_ = path_ + ".tmp." + host_name() + "." + std::to_string(::getpid());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  OCTET_CHECK(fd_ >= 0, path_ << ": cannot create " << tmp_ << ": " << std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, size_t size) {
  OCTET_CHECK(fd_ >= 0, path_ << ": write after commit");
  const char* p = static_cast<const char*>(data);
  size_t left = size;
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      OCTET_THROW(path_ << ": write failed after " << written_ << " bytes: " << std::strerror(err)
                        << " (the previous file, if any, is kept)");
    }
    p += n;
    left -= static_cast<size_t>(n);
    written_ += static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  OCTET_CHECK(fd_ >= 0, path_ << ": committed twice");
  if (::fsync(fd_) != 0)
    OCTET_THROW(path_ << ": fsync failed: " << std::strerror(errno) << " (the previous file, if any, is kept)");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    OCTET_THROW(path_ << ": close failed: " << std::strerror(err) << " (the previous file, if any, is kept)");
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    OCTET_THROW(path_ << ": rename from " << tmp_ << " failed: " << std::strerror(err));
  }
  // Persist the directory entry too.
  const int dfd = ::open(parent_dir(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void write_file_atomic(const std::string& path, const void* data, size_t size) {
  AtomicFile f(path);
  f.write(data, size);
  f.commit();
}

std::vector<std::string> remove_orphan_temps(const std::string& dir) {
  std::vector<std::string> removed;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return removed;
  const std::string host = host_name();
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    const size_t at = name.rfind(".tmp.");
    if (at == std::string::npos || at == 0) continue;
    // ".tmp.<host>.<pid>", or ".tmp.<pid>" as octet 0.1 named them.
    const std::string rest = name.substr(at + 5);
    const size_t dot = rest.rfind('.');
    const std::string who = dot == std::string::npos ? host : rest.substr(0, dot);
    const std::string pid_text = dot == std::string::npos ? rest : rest.substr(dot + 1);
    if (who != host || pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos ||
        pid_text.size() > 9)
      continue;
    const pid_t pid = static_cast<pid_t>(std::atol(pid_text.c_str()));
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
    if (::unlink((dir + "/" + name).c_str()) == 0) removed.push_back(name);
  }
  ::closedir(d);
  return removed;
}

std::string read_file(const std::string& path) {
  OCTET_CHECK(!is_dir(path), path << ": is a folder, not a file");
  errno = 0;
  std::ifstream f(path, std::ios::binary);
  OCTET_CHECK(f, path << ": cannot open for reading" << (errno ? std::string(": ") + std::strerror(errno) : ""));
  std::ostringstream ss;
  try {
    ss << f.rdbuf();
  } catch (const std::exception& e) {
    OCTET_THROW(path << ": read error: " << e.what());
  }
  OCTET_CHECK(!f.bad(), path << ": read error");
  return ss.str();
}

namespace {

std::string utc_now() {
  char buf[32] = {};
  const time_t t = ::time(nullptr);
  struct tm tm {};
  ::gmtime_r(&t, &tm);
  ::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string fd_text(int fd) {
  std::string text(512, '\0');
  const ssize_t n = ::pread(fd, text.data(), text.size(), 0);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 32 || static_cast<unsigned char>(c) > 126) c = '?';  // one printable line
  return text;
}

}  // namespace

DirLock::DirLock(const std::string& dir) : dir_(dir), path_(dir + "/" + kName) {
  for (std::string d = dir; !d.empty() && d != "." && d != "/" && !is_dir(d); d = parent_dir(d)) made_.push_back(d);
  make_dirs(dir);
  // Open, lock, and check that the locked file is still the one at the path: a holder that released its lock unlinks
  // the file first, and a lock on an unlinked file guards nothing.
  for (int attempt = 0;; ++attempt) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      const int err = errno;
      release();
      OCTET_THROW(path_ << ": cannot create the run directory's lock: " << std::strerror(err));
    }
    struct flock fl {};
    fl.l_type = F_WRLCK, fl.l_whence = SEEK_SET, fl.l_start = 0, fl.l_len = 0;
    if (::fcntl(fd_, F_SETLK, &fl) != 0) {
      const int err = errno;
      if (err == ENOLCK || err == ENOSYS || err == EOPNOTSUPP) {  // a file system without POSIX locks
        ::close(fd_);
        fd_ = -1;
        ::unlink(path_.c_str());
        std::fprintf(stderr,
                     "octet: warning: %s: this file system takes no locks (%s): the run directory is not guarded "
                     "against a second run\n",
                     path_.c_str(), std::strerror(err));
        return;
      }
      if (err == ESTALE && attempt < 100) {  // (NFS: the holder removed the file as this run opened it)
        ::close(fd_);
        fd_ = -1;
        continue;
      }
      // The holder writes its line just after it takes the lock: give it a moment, else ask the lock for its pid.
      std::string holder = fd_text(fd_);
      for (int k = 0; k < 50 && holder.empty(); ++k) {
        ::usleep(10000);
        holder = fd_text(fd_);
      }
      if (holder.empty()) {
        struct flock probe {};
        probe.l_type = F_WRLCK, probe.l_whence = SEEK_SET;
        if (::fcntl(fd_, F_GETLK, &probe) == 0 && probe.l_type != F_UNLCK)
          holder = "pid " + std::to_string(probe.l_pid) + ", starting up";
      }
      ::close(fd_);
      fd_ = -1;
      release();
      if (err == EACCES || err == EAGAIN)
        OCTET_THROW(dir << " is in use by another run (" << kName << ": "
                        << (holder.empty() ? "a process starting up" : holder)
                        << "): wait for it to end, or choose another run.name");
      OCTET_THROW(path_ << ": cannot lock: " << std::strerror(err));
    }
    struct stat held {
    }, now{};
    if (::fstat(fd_, &held) == 0 && ::stat(path_.c_str(), &now) == 0 && held.st_dev == now.st_dev &&
        held.st_ino == now.st_ino)
      break;
    ::close(fd_);
    fd_ = -1;
    if (attempt >= 100) {
      release();
      OCTET_THROW(path_ << ": the lock file keeps changing under this run");
    }
  }
  stale_ = fd_text(fd_);  // a lock file nobody held: its writer ended without removing it
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
  const std::string text = "pid " + std::to_string(::getpid()) + " host " + host + " since " + utc_now() + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    const int err = errno;
    release();  // (a constructor that throws runs no destructor)
    OCTET_THROW(path_ << ": cannot write the lock's holder: " << std::strerror(err));
  }
}

DirLock::~DirLock() { release(); }

void DirLock::release() {
  if (fd_ >= 0) {
    ::unlink(path_.c_str());  // while still locked (see the constructor's check)
    ::close(fd_);
    fd_ = -1;
  }
  for (const auto& d : made_)  // deepest first, each only when empty: a start-up that failed leaves no folder
    if (::rmdir(d.c_str()) != 0) break;
  made_.clear();
}

int64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

bool path_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool is_dir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

void remove_file(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) OCTET_THROW(path << ": cannot remove: " << std::strerror(errno));
}

std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

void make_dirs(const std::string& path) {
  if (path.empty() || is_dir(path)) return;
  const size_t slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0) make_dirs(path.substr(0, slash));
  if (::mkdir(path.c_str(), 0755) != 0 && (errno != EEXIST || !is_dir(path)))
    OCTET_THROW(path << ": cannot create folder: " << std::strerror(errno == EEXIST ? ENOTDIR : errno));
}

double peak_rss_mb() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

}  // namespace octet
