// Finding and loading the OpenCV module (dlopen), and reading a JPEG's size from its frame header.
#include "data/image_codec.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include "core/error.h"

namespace octet {

namespace {

std::string exe_dir() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.find_last_of('/'));
}

ImageCodec load_codec() {
  std::vector<std::string> places;
  if (const char* env = std::getenv("OCTET_OPENCV_MODULE")) {
    places.push_back(env);
  } else {
    const std::string dir = exe_dir();
    places = {dir + "/octet_opencv.so", dir + "/../octet_opencv.so"};
#ifdef OCTET_BUILD_DIR
    places.push_back(std::string(OCTET_BUILD_DIR) + "/octet_opencv.so");
#endif
  }
  std::string tried;
  for (const std::string& p : places) {
    void* lib = ::dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = ::dlerror();
      tried += (tried.empty() ? "" : "; ") + std::string(e ? e : p + ": not loadable");
      continue;
    }
    auto abi = reinterpret_cast<octet_img_abi_fn>(::dlsym(lib, "octet_img_abi"));
    ImageCodec c{reinterpret_cast<octet_img_decode_fn>(::dlsym(lib, "octet_img_decode")),
                 reinterpret_cast<octet_img_free_fn>(::dlsym(lib, "octet_img_free")),
                 reinterpret_cast<octet_img_resize_fn>(::dlsym(lib, "octet_img_resize")),
                 reinterpret_cast<octet_img_encode_jpeg_fn>(::dlsym(lib, "octet_img_encode_jpeg")),
                 reinterpret_cast<octet_img_free_bytes_fn>(::dlsym(lib, "octet_img_free_bytes"))};
    OCTET_CHECK(abi && abi() == kOctetImageAbi && c.decode && c.free && c.resize && c.encode_jpeg && c.free_bytes,
                p << ": not octet's OpenCV module of this version (rebuild octet)");
    return c;
  }
  OCTET_THROW(
      "image_folder needs octet's OpenCV module (octet_opencv.so, built when libopencv-imgcodecs-dev and "
      "libopencv-imgproc-dev are installed; set OCTET_OPENCV_MODULE to its path); tried "
      << tried);
}

}  // namespace

const ImageCodec& image_codec() {
  static std::once_flag once;
  static ImageCodec codec{};
  static std::string error;
  std::call_once(once, [] {
    try {
      codec = load_codec();
    } catch (const Error& e) {
      error = e.message();
    }
  });
  OCTET_CHECK(error.empty(), error);
  return codec;
}

bool jpeg_size(const uint8_t* b, size_t n, int& w, int& h) {
  if (n < 4 || b[0] != 0xFF || b[1] != 0xD8) return false;
  size_t i = 2;
  while (i + 4 <= n) {
    if (b[i] != 0xFF) return false;
    const uint8_t m = b[i + 1];
    if (m == 0xFF) {  // fill byte
      ++i;
      continue;
    }
    if (m == 0xD8 || (m >= 0xD0 && m <= 0xD7) || m == 0x01) {  // markers without a length
      i += 2;
      continue;
    }
    const size_t len = static_cast<size_t>(b[i + 2]) << 8 | b[i + 3];
    if (len < 2) return false;
    const bool sof = m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
    if (sof) {
      if (i + 9 > n) return false;
      h = b[i + 5] << 8 | b[i + 6];
      w = b[i + 7] << 8 | b[i + 8];
      return w > 0 && h > 0;
    }
    if (m == 0xDA || m == 0xD9) return false;  // scan or end before a frame header
    i += 2 + len;
  }
  return false;
}

bool pnm_complete(const uint8_t* b, size_t n) {
  if (n < 2 || b[0] != 'P' || (b[1] != '5' && b[1] != '6')) return true;
  size_t i = 2;
  uint64_t v[3] = {};  // width, height, maxval
  for (uint64_t& x : v) {
    for (;;) {  // whitespace and comments before each number
      while (i < n && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r')) ++i;
      if (i < n && b[i] == '#') {
        while (i < n && b[i] != '\n') ++i;
        continue;
      }
      break;
    }
    if (i >= n || b[i] < '0' || b[i] > '9') return true;  // a header the decoder will refuse on its own
    for (; i < n && b[i] >= '0' && b[i] <= '9' && x < (uint64_t{1} << 32); ++i) x = x * 10 + (b[i] - '0');
  }
  ++i;  // the one whitespace byte before the pixels
  uint64_t need = 0;
  if (__builtin_mul_overflow(v[0], v[1], &need) ||
      __builtin_mul_overflow(need, uint64_t{b[1] == '6' ? 3u : 1u} * (v[2] > 255 ? 2u : 1u), &need))
    return true;  // (sizes no file holds: the decoder refuses them)
  return i <= n && n - i >= need;
}

std::string image_truncated(const uint8_t* b, size_t n) {
  if (!jpeg_complete(b, n))
    return "the JPEG ends before its end-of-image marker (cut off after " + std::to_string(n) + " bytes?)";
  if (!pnm_complete(b, n))
    return "the PGM/PPM ends before the pixels its header promises (cut off after " + std::to_string(n) + " bytes?)";
  return "";
}

bool jpeg_complete(const uint8_t* b, size_t n) {
  if (n < 2 || b[0] != 0xFF || b[1] != 0xD8) return true;
  size_t i = 2;  // the segments before the first scan, by their lengths (an EXIF thumbnail holds an EOI of its own)
  while (i + 4 <= n) {
    if (b[i] != 0xFF) {  // stray bytes before a marker: skipped, as libjpeg skips them (with a warning)
      ++i;
      continue;
    }
    const uint8_t m = b[i + 1];
    if (m == 0xFF) {
      ++i;
      continue;
    }
    if (m == 0xD8 || (m >= 0xD0 && m <= 0xD7) || m == 0x01) {
      i += 2;
      continue;
    }
    if (m == 0xD9) return true;  // an image without a scan: complete as far as it goes (the decoder judges it)
    const size_t len = static_cast<size_t>(b[i + 2]) << 8 | b[i + 3];
    if (len < 2) return false;
    i += 2 + len;
    if (m == 0xDA) break;  // the first scan: entropy-coded data from here, where FF D9 can only be the end marker
  }
  for (; i + 1 < n; ++i)
    if (b[i] == 0xFF && b[i + 1] == 0xD9) return true;
  return false;
}

}  // namespace octet
