// plan_kv_groups: which layers share a block table (KV group) and which share a page of a block (slot).
#include <gtest/gtest.h>

#include "loader/kv_groups.h"

namespace rl {
namespace {

KvLayerSpec layer(int64_t window, int64_t heads = 2, int64_t head_dim = 16) {
  KvLayerSpec s;
  s.kind = window > 0 ? KvKind::kSliding : KvKind::kFull;
  s.num_kv_heads = heads;
  s.head_dim = s.v_head_dim = head_dim;
  s.window = window;
  return s;
}

TEST(KvGroups, MixedLayersGetAGroupPerKindAndShareSlots) {
  // GPT-OSS's fixture: sliding 8, full, sliding 8.
  const std::vector<KvLayerSpec> spec = {layer(8), layer(0), layer(8)};
  KvGroupPlan p = plan_kv_groups(spec, true, kMaxKvGroups);
  EXPECT_EQ(p.windows, (std::vector<int64_t>{0, 8}));
  EXPECT_EQ(p.layer_group, (std::vector<int32_t>{1, 0, 1}));
  EXPECT_EQ(p.layer_slot, (std::vector<int32_t>{0, 0, 1}));
  EXPECT_EQ(p.slot_elems, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(p.elems_per_token(), 128);  // 2 slots, not 3 layers
  EXPECT_EQ(p.describe(), "full: 1 layers; window 8: 2 layers");
  // 100 tokens in blocks of 16, decoding: 7 blocks in group 0, ceil((8 - 1 + 1) / 16) + 1 = 2 in the window's.
  EXPECT_EQ(p.elems_at(100, 16, 1), (7 + 2) * 16 * 128);
  // Not hybrid: one group, one slot per layer.
  KvGroupPlan one = plan_kv_groups(spec, false, kMaxKvGroups);
  EXPECT_EQ(one.windows, (std::vector<int64_t>{0}));
  EXPECT_EQ(one.layer_slot, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(one.elems_per_token(), 192);
}

TEST(KvGroups, UniformModelsAndTooManyKindsKeepOneGroup) {
  KvGroupPlan sliding = plan_kv_groups({layer(8), layer(4)}, true, kMaxKvGroups);
  EXPECT_EQ(sliding.windows, (std::vector<int64_t>{8}));  // every layer windowed: the widest window
  EXPECT_EQ(sliding.num_slots(), 2);
  KvGroupPlan full = plan_kv_groups({layer(0), layer(0)}, true, kMaxKvGroups);
  EXPECT_EQ(full.windows, (std::vector<int64_t>{0}));
  // Windows 2, 4, 8, 16 and full layers: 5 kinds > 4 groups.
  KvGroupPlan many = plan_kv_groups({layer(0), layer(2), layer(4), layer(8), layer(16)}, true, kMaxKvGroups);
  EXPECT_EQ(many.num_groups(), 1);
  EXPECT_EQ(many.windows[0], 0);
  // Slots hold the largest layer that shares them.
  KvGroupPlan mixed = plan_kv_groups({layer(0, 4, 32), layer(8, 2, 16)}, true, kMaxKvGroups);
  EXPECT_EQ(mixed.slot_elems, (std::vector<int64_t>{256}));
}

}  // namespace
}  // namespace rl
