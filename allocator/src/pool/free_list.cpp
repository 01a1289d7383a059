#include "umem/allocator/detail/pool/free_list.hpp"

#include <algorithm>
#include <cassert>

#include "umem/core/error.hpp"

namespace umem::alloc {

free_list::free_list(std::size_t min_split_remainder) : min_split_(min_split_remainder) {
  if (min_split_ == 0)
    throw_error(errc::invalid_argument, "free_list: the minimum split remainder must be > 0");
}

// Keeps spare_'s capacity >= the number of records, so recycle() never allocates (and never
// throws) in the middle of a merge.
block* free_list::new_block() {
  if (spare_.empty()) {
    if (spare_.capacity() < storage_.size() + 1)
      spare_.reserve(std::max<std::size_t>(16, 2 * spare_.capacity()));
    return &storage_.emplace_back();
  }
  block* b = spare_.back();
  spare_.pop_back();
  b->address = 0;
  b->size = 0;
  b->segment_base = 0;
  b->requested = 0;
  b->allocated = false;
  b->prev = nullptr;
  b->next = nullptr;
  // The ticket keeps its generation (Note [Block tickets]); the state of a recycled record is free.
  b->ticket.store(ticket::with_state(b->ticket.load(std::memory_order_relaxed), ticket::free),
                  std::memory_order_relaxed);
  return b;
}

void free_list::recycle(block* b) { spare_.push_back(b); }

namespace {
constexpr std::size_t max_spare_nodes = 64;
}  // namespace

void free_list::insert_free(block* b) {
  if (spare_nodes_.empty()) {
    free_.insert(b);
  } else {
    free_set::node_type node = std::move(spare_nodes_.back());
    spare_nodes_.pop_back();
    node.value() = b;
    free_.insert(std::move(node));
  }
  free_bytes_ += b->size;
  if (is_free_segment(b)) ++free_segment_count_;
}

void free_list::erase_free(block* b) {
  free_set::node_type node = free_.extract(b);
  assert(!node.empty());
  if (spare_nodes_.size() < max_spare_nodes) spare_nodes_.push_back(std::move(node));
  free_bytes_ -= b->size;
  if (is_free_segment(b)) --free_segment_count_;
}

block* free_list::add_segment(std::uintptr_t base, std::size_t size) {
  block* b = new_block();
  b->address = base;
  b->size = size;
  b->segment_base = base;
  insert_free(b);
  return b;
}

block* free_list::best_fit(std::size_t bytes) const {
  const auto it = free_.lower_bound(by_size_then_address::key{bytes, 0});
  return it == free_.end() ? nullptr : *it;
}

block* free_list::take(block* b, std::size_t bytes) {
  assert(!b->allocated && bytes <= b->size);
  erase_free(b);
  const std::size_t remainder = b->size - bytes;
  if (remainder >= min_split_) {
    block* tail = new_block();
    tail->address = b->address + bytes;
    tail->size = remainder;
    tail->segment_base = b->segment_base;
    tail->prev = b;
    tail->next = b->next;
    if (b->next) b->next->prev = tail;
    b->next = tail;
    b->size = bytes;
    insert_free(tail);
  }
  b->allocated = true;
  return b;
}

block* free_list::release(block* b) {
  assert(b->allocated);
  b->allocated = false;
  b->requested = 0;
  // Absorb the higher neighbour into b, then b into the lower one: the lower block survives.
  if (block* n = b->next; n && !n->allocated) {
    erase_free(n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    recycle(n);
  }
  if (block* p = b->prev; p && !p->allocated) {
    erase_free(p);
    p->size += b->size;
    p->next = b->next;
    if (b->next) b->next->prev = p;
    recycle(b);
    b = p;
  }
  insert_free(b);
  return b;
}

block* free_list::extend_segment(block* last, std::size_t extra) {
  assert(!last->next && extra > 0);
  if (!last->allocated) {
    erase_free(last);
    last->size += extra;
    insert_free(last);
    return last;
  }
  block* tail = new_block();
  tail->address = last->address + last->size;
  tail->size = extra;
  tail->segment_base = last->segment_base;
  tail->prev = last;
  last->next = tail;
  insert_free(tail);
  return tail;
}

std::vector<block*> free_list::free_segments() const {
  std::vector<block*> out;
  for (auto it = free_.rbegin(); it != free_.rend(); ++it)
    if (is_free_segment(*it)) out.push_back(*it);
  return out;
}

void free_list::remove_segment(block* b) {
  assert(is_free_segment(b));
  erase_free(b);
  recycle(b);
}

}  // namespace umem::alloc
