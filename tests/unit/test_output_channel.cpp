// OutputChannel and ChannelWaker: a consumer blocked in pop() is woken by the push or close that ends its wait,
// whether the producer wakes it itself or hands the wake to the waker's thread; the waker sleeps when nothing comes
// and wakes on the next post; what is posted before the waker is destroyed is still delivered; timeouts still
// time out.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "runtime/output_channel.h"

namespace rl {
namespace {

RequestOutput message(int32_t seq) {
  RequestOutput m;
  m.num_output_tokens = seq;  // the producer's sequence number
  return m;
}

// Pops until the channel ends; returns the sequence numbers in arrival order.
std::vector<int32_t> drain(OutputChannel* ch) {
  std::vector<int32_t> got;
  while (std::optional<RequestOutput> m = ch->pop()) got.push_back(m->num_output_tokens);
  return got;
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Wait (at most 10 s, for a loaded machine) until the waker's thread sleeps / until ch's consumer is blocked.
bool wait_until_asleep(ChannelWaker* waker) {
  for (int i = 0; i < 10000 && !waker->asleep(); ++i) sleep_ms(1);
  return waker->asleep();
}
bool wait_until_blocked(const OutputChannel& ch) {
  for (int i = 0; i < 10000 && ch.num_waiting() == 0; ++i) sleep_ms(1);
  return ch.num_waiting() > 0;
}

TEST(OutputChannel, PushAndCloseWakeABlockedConsumer) {
  auto ch = std::make_shared<OutputChannel>();
  std::vector<int32_t> got;
  std::thread consumer([&] { got = drain(ch.get()); });
  EXPECT_TRUE(wait_until_blocked(*ch));
  ch->push(message(1));
  EXPECT_TRUE(wait_until_blocked(*ch));
  ch->push(message(2));
  ch->close();
  consumer.join();
  EXPECT_EQ(got, (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(ch->closed());
}

TEST(OutputChannel, PopForTimesOutWithAWaker) {
  ChannelWaker waker(0.001);
  auto ch = std::make_shared<OutputChannel>();
  ch->set_waker(&waker);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(ch->pop_for(0.03).has_value());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(25));
  EXPECT_FALSE(ch->closed());
  ch->push(message(7));
  std::optional<RequestOutput> m = ch->pop_for(1.0);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->num_output_tokens, 7);
}

// Many channels, a consumer thread blocked on each, messages pushed round-robin with pauses so that consumers are
// asleep at many pushes: every consumer gets its messages, in order, and the waker did the waking.
TEST(ChannelWaker, WakesTheBlockedConsumersOfManyChannels) {
  constexpr int kChannels = 16, kMessages = 60;
  ChannelWaker waker(0.05);
  std::vector<std::shared_ptr<OutputChannel>> chans;
  std::vector<std::vector<int32_t>> got(kChannels);
  std::vector<std::thread> consumers;
  for (int c = 0; c < kChannels; ++c) {
    chans.push_back(std::make_shared<OutputChannel>());
    chans.back()->set_waker(&waker);
    consumers.emplace_back([&, c] { got[static_cast<size_t>(c)] = drain(chans[static_cast<size_t>(c)].get()); });
  }
  for (int i = 0; i < kMessages; ++i) {
    for (auto& ch : chans) ch->push(message(i));
    if (i % 4 == 0) sleep_ms(1);
  }
  for (auto& ch : chans) ch->close();
  for (std::thread& t : consumers) t.join();
  std::vector<int32_t> want(kMessages);
  for (int i = 0; i < kMessages; ++i) want[static_cast<size_t>(i)] = i;
  for (int c = 0; c < kChannels; ++c) EXPECT_EQ(got[static_cast<size_t>(c)], want) << "channel " << c;
  EXPECT_GT(waker.posts_while_spinning() + waker.posts_while_sleeping(), 0);
}

// Past its spin the waker sleeps; the next post wakes it (a system call) and it wakes the consumer.
TEST(ChannelWaker, SleepsAfterItsSpinAndWakesOnTheNextPost) {
  ChannelWaker waker(0.002);
  auto ch = std::make_shared<OutputChannel>();
  ch->set_waker(&waker);
  std::vector<int32_t> got;
  std::thread consumer([&] { got = drain(ch.get()); });
  EXPECT_TRUE(wait_until_blocked(*ch));
  EXPECT_TRUE(wait_until_asleep(&waker));
  ch->push(message(3));
  EXPECT_TRUE(wait_until_blocked(*ch));    // the consumer took it and waits again
  EXPECT_TRUE(wait_until_asleep(&waker));  // the waker woke for the push, spun, and slept again
  ch->close();
  consumer.join();
  EXPECT_EQ(got, (std::vector<int32_t>{3}));
  EXPECT_GE(waker.posts_while_sleeping(), 2);  // the push and the close each found it asleep
}

// A wake posted just before the waker is destroyed is still delivered.
TEST(ChannelWaker, DeliversWhatWasPostedBeforeItIsDestroyed) {
  auto ch = std::make_shared<OutputChannel>();
  std::vector<int32_t> got;
  std::thread consumer([&] { got = drain(ch.get()); });
  {
    ChannelWaker waker(0.0);
    ch->set_waker(&waker);
    EXPECT_TRUE(wait_until_blocked(*ch));
    ch->push(message(5));
    EXPECT_EQ(waker.posts_while_spinning() + waker.posts_while_sleeping(), 1);  // the wake went to the waker
    ch->set_waker(nullptr);  // the producer is done with the waker before it goes
  }
  EXPECT_TRUE(wait_until_blocked(*ch));
  ch->close();
  consumer.join();
  EXPECT_EQ(got, (std::vector<int32_t>{5}));
}

}  // namespace
}  // namespace rl
