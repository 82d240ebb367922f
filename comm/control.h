// The small exchanges of a run beside its tensors: sums and maxima of host scalars, broadcasts, byte strings to and
// from one rank, a gather of byte strings, the rank's place on its node. Each is bounded and named as comm/wait.h's
// collectives are; trainer/ reaches other ranks only through these and Transport.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "comm/wait.h"

namespace octet {

void sum_all(const World& w, double* v, int n, const WaitOptions& o);  // v[0..n) <- their sums over the ranks
int max_all(const World& w, int v, const WaitOptions& o);              // the largest v of any rank
// out[r * n .. (r + 1) * n) <- rank r's in[0..n), on every rank.
void gather_all(const World& w, const double* in, double* out, int n, const WaitOptions& o);
void broadcast(const World& w, int64_t* v, int n, int root, const WaitOptions& o);
void broadcast(const World& w, float* v, int64_t n, int root, const WaitOptions& o);  // any n (pieces below 2^28)
// A byte string of any length to rank `to` (its size first, then pieces below MPI's int count); recv_bytes takes it.
void send_bytes(const World& w, const std::string& bytes, int to, const WaitOptions& o);
std::string recv_bytes(const World& w, int from, const WaitOptions& o);
// Every rank's string to root, in rank order (other ranks get none); under 2 GB in all.
std::vector<std::string> gather_bytes(const World& w, const std::string& mine, int root, const WaitOptions& o);
// This rank's index among the ranks that share its node, in rank order, and how many share it (collective).
struct NodeLocal {
  int rank = 0, size = 1;
};
NodeLocal node_local(const World& w);

}  // namespace octet
