// octet_opencv.so: the only code that links OpenCV (imgcodecs, imgproc); octet dlopens it for image_folder datasets
// (data/image_codec.h has the ABI).
#include <opencv2/core.hpp>
#include <opencv2/core/utils/logger.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <cstdio>
#include <cstring>
#include <vector>

#include "data/image_codec.h"

namespace {

// The error for octet's one line: OpenCV's exception texts hold newlines.
void say(char* err, size_t len, const char* what) {
  if (!err || !len) return;
  std::snprintf(err, len, "%s", what);
  for (char* p = err; *p; ++p)
    if (*p == '\n' || *p == '\r') *p = ' ';
  for (size_t k = std::strlen(err); k > 0 && err[k - 1] == ' '; --k) err[k - 1] = 0;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int octet_img_abi() { return octet::kOctetImageAbi; }

__attribute__((visibility("default"))) int octet_img_decode(const uint8_t* bytes, size_t n, int reduce, OctetImage* img,
                                                            char* err, size_t errlen) {
  try {
    static const bool once = [] {
      cv::setNumThreads(1);  // octet spreads images over its own decode threads
      // octet says what went wrong in one line of its own: OpenCV's warnings on stderr would come before it
      cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_SILENT);
      return true;
    }();
    (void)once;
    if (n == 0) {
      say(err, errlen, "the file is empty");
      return -1;
    }
    const int flag = reduce >= 8   ? cv::IMREAD_REDUCED_COLOR_8
                     : reduce >= 4 ? cv::IMREAD_REDUCED_COLOR_4
                     : reduce >= 2 ? cv::IMREAD_REDUCED_COLOR_2
                                   : cv::IMREAD_COLOR;
    const cv::Mat raw(1, static_cast<int>(n), CV_8U, const_cast<uint8_t*>(bytes));
    cv::Mat bgr = cv::imdecode(raw, flag | cv::IMREAD_IGNORE_ORIENTATION);
    if (bgr.empty()) {
      say(err, errlen, "not an image OpenCV can decode (unknown format, or corrupt or truncated data)");
      return -1;
    }
    auto* m = new cv::Mat(std::move(bgr));
    img->data = m->data;
    img->h = m->rows, img->w = m->cols;
    img->stride = m->step[0];
    img->owner = m;
    return 0;
  } catch (const std::exception& e) {
    say(err, errlen, e.what());
    return -1;
  }
}

__attribute__((visibility("default"))) void octet_img_free(OctetImage* img) {
  delete static_cast<cv::Mat*>(img->owner);
  img->owner = nullptr, img->data = nullptr;
}

__attribute__((visibility("default"))) int octet_img_resize(const OctetImage* img, int x, int y, int w, int h,
                                                            uint8_t* out, int out_w, int out_h, char* err,
                                                            size_t errlen) {
  try {
    const cv::Mat src(img->h, img->w, CV_8UC3, img->data, img->stride);
    cv::Mat dst(out_h, out_w, CV_8UC3, out);
    const bool shrink = w >= 2 * out_w && h >= 2 * out_h;
    cv::resize(src(cv::Rect(x, y, w, h)), dst, dst.size(), 0, 0, shrink ? cv::INTER_AREA : cv::INTER_LINEAR);
    return 0;
  } catch (const std::exception& e) {
    say(err, errlen, e.what());
    return -1;
  }
}

__attribute__((visibility("default"))) int octet_img_encode_jpeg(const uint8_t* bgr, int h, int w, size_t stride,
                                                                 int quality, const uint8_t** out, size_t* n,
                                                                 void** owner, char* err, size_t errlen) {
  try {
    const cv::Mat src(h, w, CV_8UC3, const_cast<uint8_t*>(bgr), stride);
    auto* buf = new std::vector<uchar>();
    if (!cv::imencode(".jpg", src, *buf, {cv::IMWRITE_JPEG_QUALITY, quality})) {
      delete buf;
      say(err, errlen, "OpenCV could not encode the image as JPEG");
      return -1;
    }
    *out = buf->data(), *n = buf->size(), *owner = buf;
    return 0;
  } catch (const std::exception& e) {
    say(err, errlen, e.what());
    return -1;
  }
}

__attribute__((visibility("default"))) void octet_img_free_bytes(void* owner) {
  delete static_cast<std::vector<uchar>*>(owner);
}

}  // extern "C"
