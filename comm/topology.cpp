// Node discovery and the node / cross-node communicators of a two-level exchange (see topology.h).
#include "comm/topology.h"

#include <algorithm>
#include <sstream>

#include "comm/wait.h"
#include "core/error.h"

namespace octet {

namespace {

World sub_world(const World& w, MPI_Comm c) {
  World s = w;
  s.comm = c;
  CHECK_MPI(MPI_Comm_rank(c, &s.rank));
  CHECK_MPI(MPI_Comm_size(c, &s.size));
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  return s;
}

}  // namespace

bool Topology::even() const {
  return std::all_of(node_sizes.begin(), node_sizes.end(), [&](int s) { return s == node_sizes.front(); });
}

std::string Topology::describe() const {
  std::ostringstream o;
  if (even()) {
    o << nodes << (nodes == 1 ? " node x " : " nodes x ") << node_sizes.front()
      << (node_sizes.front() == 1 ? " rank" : " ranks");
    return o.str();
  }
  o << nodes << " nodes of ";
  for (size_t i = 0; i < node_sizes.size(); ++i) o << (i ? ", " : "") << node_sizes[i];
  o << " ranks";
  return o.str();
}

TopologyHolder::TopologyHolder(const World& w, int ranks_per_node) {
  OCTET_CHECK(ranks_per_node >= 0, "parallel.ranks_per_node: " << ranks_per_node << " is negative (0: ask MPI)");
  MPI_Comm node = MPI_COMM_NULL;
  if (ranks_per_node > 0) {
    OCTET_CHECK(w.size % ranks_per_node == 0, "parallel.ranks_per_node: " << ranks_per_node << " does not divide the "
                                                                          << w.size << " ranks into whole nodes");
    CHECK_MPI(MPI_Comm_split(w.comm, w.rank / ranks_per_node, w.rank, &node));
  } else {
    CHECK_MPI(MPI_Comm_split_type(w.comm, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &node));
  }
  t_.node_world = sub_world(w, node);
  t_.local_rank = t_.node_world.rank;
  t_.local_size = t_.node_world.size;
  // Every rank learns each rank's node leader (the lowest world rank there): nodes are numbered in leader order.
  int leader = w.rank;
  allreduce_bounded(t_.node_world, &leader, 1, MPI_INT, MPI_MIN, {"MPI_Iallreduce (start-up: node leaders)"});
  std::vector<int> leaders(static_cast<size_t>(w.size));
  allgather_bounded(w, &leader, 1, MPI_INT, leaders.data(), {"MPI_Iallgather (start-up: node layout)"});
  std::vector<int> distinct = leaders;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  t_.nodes = static_cast<int>(distinct.size());
  t_.node = static_cast<int>(std::lower_bound(distinct.begin(), distinct.end(), leader) - distinct.begin());
  t_.node_sizes.assign(distinct.size(), 0);
  for (int l : leaders) ++t_.node_sizes[std::lower_bound(distinct.begin(), distinct.end(), l) - distinct.begin()];
  MPI_Comm cross = MPI_COMM_NULL;
  CHECK_MPI(MPI_Comm_split(w.comm, t_.local_rank, t_.node, &cross));
  t_.cross_world = sub_world(w, cross);
}

TopologyHolder::~TopologyHolder() {
  for (MPI_Comm* c : {&t_.node_world.comm, &t_.cross_world.comm})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
}

const char* hierarchy_name(Hierarchy h) { return h == Hierarchy::Flat ? "flat" : "two_level"; }

Hierarchy choose_hierarchy(const std::string& setting, const Topology& t, int world, const std::string& where) {
  const bool fits = t.nodes > 1 && t.even() && t.node_sizes.front() > 1;
  if (setting == "flat") return Hierarchy::Flat;
  if (setting == "auto") return fits ? Hierarchy::TwoLevel : Hierarchy::Flat;
  OCTET_CHECK(setting == "two_level",
              where << ": parallel.hierarchy: unknown value '" << setting << "' (known: auto, flat, two_level)");
  OCTET_CHECK(world > 1, where << ": parallel.hierarchy: two_level needs more than one rank (this run has 1)");
  OCTET_CHECK(t.even(),
              where << ": parallel.hierarchy: two_level needs the same number of ranks on every node; this job has "
                    << t.describe() << " (use flat, or place the ranks evenly)");
  OCTET_CHECK(t.nodes > 1, where << ": parallel.hierarchy: two_level needs more than one node; all " << world
                                 << " ranks share one (use flat)");
  OCTET_CHECK(t.node_sizes.front() > 1,
              where << ": parallel.hierarchy: two_level needs more than one rank per node; this job has "
                    << t.describe() << " (use flat)");
  return Hierarchy::TwoLevel;
}

}  // namespace octet
