#include "loader/kv_groups.h"

#include <algorithm>

namespace rl {

int64_t KvGroupPlan::group_num_layers(int32_t group) const {
  return std::count(layer_group.begin(), layer_group.end(), group);
}

int64_t KvGroupPlan::elems_per_token() const {
  int64_t elems = 0;
  for (int64_t e : slot_elems) elems += e;
  return elems;
}

int64_t KvGroupPlan::elems_at(int64_t context, int64_t block_size, int64_t max_step) const {
  const int64_t all = (context + block_size - 1) / block_size;
  int64_t blocks = 0;
  for (int64_t w : windows) {
    blocks += w <= 0 ? all : std::min(all, (w - 1 + max_step + block_size - 1) / block_size + 1);
  }
  return blocks * block_size * elems_per_token();
}

std::string KvGroupPlan::describe() const {
  std::string out;
  for (int32_t g = 0; g < num_groups(); ++g) {
    if (g > 0) out += "; ";
    out += windows[g] > 0 ? "window " + std::to_string(windows[g]) : std::string("full");
    out += ": " + std::to_string(group_num_layers(g)) + " layers";
  }
  return out;
}

KvGroupPlan plan_kv_groups(const std::vector<KvLayerSpec>& spec, bool hybrid, int32_t max_groups) {
  KvGroupPlan plan;
  const auto window_of = [](const KvLayerSpec& l) { return l.kind == KvKind::kSliding ? l.window : int64_t{0}; };
  std::vector<int64_t> windows;
  bool any_full = false;
  for (const KvLayerSpec& l : spec) {
    const int64_t w = window_of(l);
    any_full = any_full || w == 0;
    if (w > 0 && std::find(windows.begin(), windows.end(), w) == windows.end()) windows.push_back(w);
  }
  std::sort(windows.begin(), windows.end());
  const int64_t num_kinds = static_cast<int64_t>(windows.size()) + (any_full ? 1 : 0);
  if (!hybrid || !any_full || num_kinds < 2 || num_kinds > max_groups) {
    plan.windows = {any_full || windows.empty() ? 0 : windows.back()};
    for (size_t i = 0; i < spec.size(); ++i) {
      plan.layer_group.push_back(0);
      plan.layer_slot.push_back(static_cast<int32_t>(i));
      plan.slot_elems.push_back(spec[i].elems_per_token());
    }
    return plan;
  }
  plan.windows.push_back(0);
  plan.windows.insert(plan.windows.end(), windows.begin(), windows.end());
  std::vector<int32_t> next_slot(plan.windows.size(), 0);
  for (const KvLayerSpec& l : spec) {
    const int32_t g = static_cast<int32_t>(
        std::find(plan.windows.begin(), plan.windows.end(), window_of(l)) - plan.windows.begin());
    const int32_t slot = next_slot[static_cast<size_t>(g)]++;
    plan.layer_group.push_back(g);
    plan.layer_slot.push_back(slot);
    if (slot >= plan.num_slots()) plan.slot_elems.push_back(0);
    int64_t& elems = plan.slot_elems[static_cast<size_t>(slot)];
    elems = std::max(elems, l.elems_per_token());
  }
  return plan;
}

}  // namespace rl
