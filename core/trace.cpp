// Per-thread span buffers behind core/trace.h and their Chrome trace JSON.
#include "core/trace.h"

#include <cstdio>
#include <memory>
#include <mutex>
#include <vector>

namespace octet {
namespace trace {

std::atomic<bool> g_on{false};

namespace {

struct Rec {
  const char* name;
  const char* detail;
  double t0, t1;
  int64_t arg;
};

struct ThreadBuf {
  std::mutex mu;  // the owner appends, take_json() reads and clears
  std::string name;
  int id = 0;
  std::vector<Rec> recs;
};

std::mutex g_mu;
std::vector<std::shared_ptr<ThreadBuf>> g_bufs;  // every thread that ever recorded or was named
std::atomic<uint64_t> g_dropped{0};

ThreadBuf& mine() {
  thread_local std::shared_ptr<ThreadBuf> buf;
  if (!buf) {
    buf = std::make_shared<ThreadBuf>();
    std::lock_guard<std::mutex> lk(g_mu);
    buf->id = static_cast<int>(g_bufs.size());
    buf->name = "thread " + std::to_string(buf->id);
    g_bufs.push_back(buf);
  }
  return *buf;
}

void json_string(std::string& out,
                 const char* s) {  // names are ours (phases, layers, tensors): escape the few specials
  out += '"';
  for (; *s; ++s) {
    if (*s == '"' || *s == '\\') out += '\\';
    if (static_cast<unsigned char>(*s) < 0x20) continue;
    out += *s;
  }
  out += '"';
}

}  // namespace

void set_on(bool on) { g_on.store(on, std::memory_order_relaxed); }

void name_thread(const char* name) {
  ThreadBuf& b = mine();
  std::lock_guard<std::mutex> lk(b.mu);
  b.name = name;
}

void add(const char* name, const char* detail, double t0, double t1, int64_t arg) {
  ThreadBuf& b = mine();
  std::lock_guard<std::mutex> lk(b.mu);
  if (b.recs.size() >= kMaxSpans) {
    g_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  b.recs.push_back({name, detail, t0, t1, arg});
}

std::string take_json(int pid, double origin) {
  std::vector<std::shared_ptr<ThreadBuf>> bufs;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    bufs = g_bufs;
  }
  std::string out;
  char num[200];
  std::snprintf(num, sizeof num,
                "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}},\n"
                "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"args\":{\"sort_index\":%d}}",
                pid, pid, pid, pid);
  out += num;
  for (auto& b : bufs) {
    std::lock_guard<std::mutex> lk(b->mu);
    if (b->recs.empty()) continue;
    out += ",\n";
    std::snprintf(num, sizeof num,
                  "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", pid, b->id);
    out += num;
    json_string(out, b->name.c_str());
    out += "}}";
    for (const Rec& r : b->recs) {
      out += ",\n{\"ph\":\"X\",\"name\":";
      if (r.detail) {
        json_string(out, (std::string(r.name) + " " + r.detail).c_str());
      } else {
        json_string(out, r.name);
      }
      std::snprintf(num, sizeof num, ",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f", r.name, pid,
                    b->id, (r.t0 - origin) * 1e6, (r.t1 - r.t0) * 1e6);
      out += num;
      if (r.arg >= 0) out += ",\"args\":{\"step\":" + std::to_string(r.arg) + "}";
      out += '}';
    }
    b->recs.clear();
  }
  return out;
}

uint64_t dropped() { return g_dropped.load(std::memory_order_relaxed); }

}  // namespace trace
}  // namespace octet
