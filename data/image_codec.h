// The image decoder octet loads at run time (dlopen) from its OpenCV module, octet_opencv.so: OpenCV's imgcodecs
// pulls ~135 shared libraries (GDAL and more) that no run without image files should map. The module's C ABI is
// declared here; image_codec() finds and checks it once.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

extern "C" {
// A decoded image: rows of w interleaved BGR pixels (OpenCV's order), `stride` bytes apart; owner: the module's
// storage.
struct OctetImage {
  uint8_t* data;
  int h, w;
  size_t stride;
  void* owner;
};
// Decodes bytes (JPEG, PNG, ... whatever OpenCV reads) to BGR at 1/reduce scale (1, 2, 4 or 8: JPEG's DCT scaling;
// other formats decode whole and are shrunk). 0 on success, else -1 with a message in err.
typedef int (*octet_img_decode_fn)(const uint8_t* bytes, size_t n, int reduce, OctetImage* img, char* err,
                                   size_t errlen);
typedef void (*octet_img_free_fn)(OctetImage* img);
// Resizes the box (x, y, w, h) of img to out_w x out_h BGR at out (row stride out_w * 3): bilinear, area averaging
// when shrinking by 2 or more. 0 on success, else -1 with a message.
typedef int (*octet_img_resize_fn)(const OctetImage* img, int x, int y, int w, int h, uint8_t* out, int out_w,
                                   int out_h, char* err, size_t errlen);
// Encodes h x w BGR pixels (rows `stride` bytes apart) as a baseline JPEG of quality 1..100: *out, *n the bytes, held
// by *owner until octet_img_free_bytes(*owner). 0 on success, else -1 with a message (`octet bench jpegs`).
typedef int (*octet_img_encode_jpeg_fn)(const uint8_t* bgr, int h, int w, size_t stride, int quality,
                                        const uint8_t** out, size_t* n, void** owner, char* err, size_t errlen);
typedef void (*octet_img_free_bytes_fn)(void* owner);
// The module's ABI version (kOctetImageAbi).
typedef int (*octet_img_abi_fn)();
}

namespace octet {

constexpr int kOctetImageAbi = 2;

struct ImageCodec {
  octet_img_decode_fn decode;
  octet_img_free_fn free;
  octet_img_resize_fn resize;
  octet_img_encode_jpeg_fn encode_jpeg;
  octet_img_free_bytes_fn free_bytes;
};

// Loads the module on first use: $OCTET_OPENCV_MODULE, else octet_opencv.so beside the executable, one folder up, or
// in the build folder it was compiled in. Throws naming every place tried and dlopen's reason.
const ImageCodec& image_codec();

// Width and height from a JPEG's frame header (SOFn) without decoding; false when bytes are no JPEG or end first.
bool jpeg_size(const uint8_t* bytes, size_t n, int& w, int& h);
// For bytes that start as a JPEG: whether its end-of-image marker follows its first scan (libjpeg decodes a file cut
// short with the missing part grey and only a warning). Not a JPEG: true (other decoders fail on their own).
bool jpeg_complete(const uint8_t* bytes, size_t n);
// For bytes that start as a binary PGM or PPM (P5, P6): whether the pixels its header promises follow (OpenCV's reader
// fails on a short one, writing its own lines to stderr). Not one: true.
bool pnm_complete(const uint8_t* bytes, size_t n);
// Why bytes are a cut-off image (a JPEG without its end, a PGM/PPM short of its pixels), or "" (as far as these
// checks can tell; the decoder judges the rest).
std::string image_truncated(const uint8_t* bytes, size_t n);

}  // namespace octet
