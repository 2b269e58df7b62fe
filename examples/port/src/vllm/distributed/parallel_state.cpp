// Ported from: vllm/distributed/parallel_state.py @ 0123abcd

namespace vllm::distributed {

struct GroupCoordinator {
  int world_size = 1;
  int rank = 0;
};

GroupCoordinator& get_world_group() {
  static GroupCoordinator world;
  return world;
}

}  // namespace vllm::distributed
