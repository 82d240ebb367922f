// Where the ranks sit: which node each is on (MPI's shared-memory split, or a fixed ranks-per-node layout), its place
// there, and the two communicators a two-level exchange runs over (the ranks of its node; its peers of the same
// local index on the other nodes). parallel.hierarchy picks flat or two-level from it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "comm/world.h"

namespace octet {

struct Topology {
  int nodes = 1, node = 0;             // nodes in the job, this rank's (numbered by their lowest world rank)
  int local_rank = 0, local_size = 1;  // this rank's index on its node (in world-rank order), ranks on its node
  std::vector<int> node_sizes;         // ranks on each node
  World node_world;                    // the ranks of this node (rank = local_rank)
  World cross_world;                   // the ranks of local index local_rank on every node (rank = node)
  bool even() const;                   // every node holds the same number of ranks
  std::string describe() const;        // "2 nodes x 2 ranks" / "3 nodes of 2, 1, 1 ranks"
};

// Collective over w. ranks_per_node > 0 lays the ranks out K to a node in world-rank order (a launcher that hides
// the nodes, or a test of the two-level exchange on one machine); 0 asks MPI which ranks share memory. Frees its
// communicators on destruction (TopologyHolder).
class TopologyHolder {
 public:
  TopologyHolder(const World& w, int ranks_per_node);
  ~TopologyHolder();
  TopologyHolder(const TopologyHolder&) = delete;
  TopologyHolder& operator=(const TopologyHolder&) = delete;
  const Topology& get() const { return t_; }

 private:
  Topology t_;
};

enum class Hierarchy { Flat, TwoLevel };
const char* hierarchy_name(Hierarchy h);
// parallel.hierarchy (auto | flat | two_level) for this topology; world: the job's rank count. auto: two_level when
// more than one node holds more than one rank and every node holds as many. two_level on one rank, one node, or
// uneven nodes fails with one line naming the key and the layout.
// where: the config file, for the error lines.
Hierarchy choose_hierarchy(const std::string& setting, const Topology& t, int world, const std::string& where);

}  // namespace octet
