#include "tokenizer/added_tokens.h"

#include <utf8proc.h>

#include "tokenizer/unicode.h"

namespace rl::tok {
namespace {

bool is_word_char(char32_t cp) {
  if (cp == '_') return true;
  auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

// The code point that ends right before byte offset `end`.
char32_t code_point_before(std::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return next_code_point(text, &start);
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<std::string>& patterns,
                                     const std::vector<int32_t>& tokens,
                                     const std::vector<AddedToken>* table)
    : table_(table) {
  for (size_t i = 0; i < patterns.size(); ++i) {
    const std::string& p = patterns[i];
    if (p.empty()) continue;
    int32_t node = 0;
    for (char c : p) {
      auto b = static_cast<unsigned char>(c);
      int32_t next = child(node, b);
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_.push_back(Node{});
        edges_.emplace((static_cast<uint64_t>(node) << 8) | b, next);
      }
      node = next;
    }
    if (nodes_[node].token < 0) nodes_[node].token = tokens[i];
    first_byte_[static_cast<unsigned char>(p[0])] = true;
  }
}

bool AddedTokenMatcher::boundary_ok(std::string_view text, size_t start, size_t end) const {
  if (start > 0 && is_word_char(code_point_before(text, start))) return false;
  if (end < text.size()) {
    size_t p = end;
    if (is_word_char(next_code_point(text, &p))) return false;
  }
  return true;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>* out) const {
  size_t emitted = 0;  // text before this offset has been emitted
  size_t i = 0;
  while (i < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    int32_t node = 0;
    int32_t best = -1;
    size_t best_end = 0;
    for (size_t j = i; j < text.size(); ++j) {
      node = child(node, static_cast<unsigned char>(text[j]));
      if (node < 0) break;
      int32_t tok = nodes_[node].token;
      if (tok >= 0 && (!(*table_)[tok].single_word || boundary_ok(text, i, j + 1))) {
        best = tok;
        best_end = j + 1;
      }
    }
    if (best < 0) {
      ++i;
      continue;
    }
    const AddedToken& t = (*table_)[best];
    size_t start = i, end = best_end;
    if (t.lstrip) {
      while (start > emitted) {
        size_t s = start - 1;
        while (s > emitted && (static_cast<unsigned char>(text[s]) & 0xC0) == 0x80) --s;
        size_t p = s;
        if (!is_white_space(next_code_point(text, &p))) break;
        start = s;
      }
    }
    if (t.rstrip) {
      while (end < text.size()) {
        size_t p = end;
        if (!is_white_space(next_code_point(text, &p))) break;
        end = p;
      }
    }
    if (start > emitted) out->push_back({text.substr(emitted, start - emitted), -1});
    out->push_back({text.substr(start, end - start), best});
    emitted = end;
    i = end;
  }
  if (emitted < text.size()) out->push_back({text.substr(emitted), -1});
}

}  // namespace rl::tok
