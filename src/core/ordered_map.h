// The object type of OrderedJson: keys in insertion order (chat templates iterate objects as written) with
// hashed lookup, so that parsing an object of n keys from an untrusted request costs O(n), not the O(n^2) of
// nlohmann::ordered_map's linear search.
//
// Invariants: the entries live in the vector base in insertion order; when size() >= kIndexFrom, slots_ is an
// open-addressing table (power-of-two size, at most half full) of entry positions + 1 (0 = empty) covering every
// entry, hashed with a per-process random seed (no precomputed collisions). Below kIndexFrom, slots_ is empty and
// lookup scans (faster for the small objects that are most of them). Every mutating member keeps the index
// current; const members only read, so concurrent readers of a const object are safe. nlohmann::basic_json uses
// exactly the members defined here (emplace, operator[], at, find, count, erase, insert, clear) plus the
// vector's read-only ones.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rl {

uint64_t ordered_map_hash(std::string_view key);

template <class Key, class T, class IgnoredLess = std::less<Key>,
          class Allocator = std::allocator<std::pair<const Key, T>>>
class HashedOrderedMap : public std::vector<std::pair<const Key, T>, Allocator> {
 public:
  using key_type = Key;
  using mapped_type = T;
  using Container = std::vector<std::pair<const Key, T>, Allocator>;
  using iterator = typename Container::iterator;
  using const_iterator = typename Container::const_iterator;
  using size_type = typename Container::size_type;
  using value_type = typename Container::value_type;
  using key_compare = std::equal_to<>;
  static constexpr size_t kIndexFrom = 16;

  HashedOrderedMap() = default;
  explicit HashedOrderedMap(const Allocator& alloc) : Container(alloc) {}
  template <class It>
  HashedOrderedMap(It first, It last, const Allocator& alloc = Allocator()) : Container(alloc) {
    insert(first, last);
  }
  HashedOrderedMap(std::initializer_list<value_type> init, const Allocator& alloc = Allocator())
      : Container(alloc) {
    insert(init.begin(), init.end());
  }

  template <class K, class V>
  std::pair<iterator, bool> emplace(K&& key, V&& value) {
    const std::string_view k(key);
    if (iterator it = find(k); it != this->end()) return {it, false};
    Container::emplace_back(std::forward<K>(key), std::forward<V>(value));
    index_last();
    return {std::prev(this->end()), true};
  }
  template <class K>
  T& operator[](K&& key) {
    return emplace(std::forward<K>(key), T{}).first->second;
  }
  template <class K>
  const T& operator[](K&& key) const {
    return at(std::forward<K>(key));
  }
  template <class K>
  T& at(const K& key) {
    iterator it = find(key);
    if (it == this->end()) throw std::out_of_range("key not found");
    return it->second;
  }
  template <class K>
  const T& at(const K& key) const {
    const_iterator it = find(key);
    if (it == this->end()) throw std::out_of_range("key not found");
    return it->second;
  }
  template <class K>
  iterator find(const K& key) {
    return this->begin() + static_cast<std::ptrdiff_t>(position(std::string_view(key)));
  }
  template <class K>
  const_iterator find(const K& key) const {
    return this->begin() + static_cast<std::ptrdiff_t>(position(std::string_view(key)));
  }
  template <class K>
  size_type count(const K& key) const {
    return position(std::string_view(key)) == this->size() ? 0 : 1;
  }
  template <class K, class = std::enable_if_t<!std::is_same_v<std::decay_t<K>, iterator> &&
                                              !std::is_same_v<std::decay_t<K>, const_iterator>>>
  size_type erase(const K& key) {
    iterator it = find(key);
    if (it == this->end()) return 0;
    erase(it);
    return 1;
  }
  iterator erase(iterator pos) { return erase(pos, std::next(pos)); }
  iterator erase(iterator first, iterator last) {
    if (first == last) return first;
    // pair<const Key, T> cannot be move-assigned: rebuild the tail in place (as nlohmann::ordered_map does).
    const auto n = std::distance(first, last);
    const auto offset = std::distance(this->begin(), first);
    for (auto it = first; std::next(it, n) != this->end(); ++it) {
      it->~value_type();
      new (&*it) value_type{std::move(*std::next(it, n))};
    }
    Container::resize(this->size() - static_cast<size_type>(n));
    rebuild();
    return this->begin() + offset;
  }
  std::pair<iterator, bool> insert(value_type&& v) { return emplace(v.first, std::move(v.second)); }
  std::pair<iterator, bool> insert(const value_type& v) {
    if (iterator it = find(v.first); it != this->end()) return {it, false};
    Container::push_back(v);
    index_last();
    return {std::prev(this->end()), true};
  }
  template <class It>
  void insert(It first, It last) {
    for (; first != last; ++first) insert(*first);
  }
  void clear() noexcept {
    Container::clear();
    slots_.clear();
  }

  friend bool operator==(const HashedOrderedMap& a, const HashedOrderedMap& b) {
    return static_cast<const Container&>(a) == static_cast<const Container&>(b);
  }
  friend bool operator!=(const HashedOrderedMap& a, const HashedOrderedMap& b) { return !(a == b); }
  friend bool operator<(const HashedOrderedMap& a, const HashedOrderedMap& b) {
    return static_cast<const Container&>(a) < static_cast<const Container&>(b);
  }

 private:
  // The entry's position, or size() when absent.
  size_t position(std::string_view key) const {
    const size_t n = this->size();
    if (slots_.empty()) {
      for (size_t i = 0; i < n; ++i) {
        if (std::string_view(this->data()[i].first) == key) return i;
      }
      return n;
    }
    const size_t mask = slots_.size() - 1;
    for (size_t s = ordered_map_hash(key) & mask;; s = (s + 1) & mask) {
      const uint32_t e = slots_[s];
      if (e == 0) return n;
      if (std::string_view(this->data()[e - 1].first) == key) return e - 1;
    }
  }
  void place(size_t pos) {
    const size_t mask = slots_.size() - 1;
    size_t s = ordered_map_hash(std::string_view(this->data()[pos].first)) & mask;
    while (slots_[s] != 0) s = (s + 1) & mask;
    slots_[s] = static_cast<uint32_t>(pos + 1);
  }
  // The newest entry was appended.
  void index_last() {
    const size_t n = this->size();
    if (n < kIndexFrom) return;
    if (slots_.empty() || 2 * n > slots_.size()) return rebuild();
    place(n - 1);
  }
  void rebuild() {
    slots_.clear();
    const size_t n = this->size();
    if (n < kIndexFrom) return;
    size_t cap = 64;
    while (cap < 4 * n) cap *= 2;
    slots_.assign(cap, 0);
    for (size_t i = 0; i < n; ++i) place(i);
  }

  std::vector<uint32_t> slots_;
};

}  // namespace rl
