// The schedule runner and its stage links.
//
// Every rank builds every neighbour's action list, so it knows the exact order in which a
// neighbour sends to it (the comm core delivers a pair's messages in send order and each
// message carries only its size). Receives are posted in that order into a fixed pool of
// slots; a message is looked up by its key (activation or gradient, direction, micro-batch)
// when an action needs it. The pool's size is what the schedule needs: when this rank takes
// its k-th message from a neighbour, every message that neighbour sent up to the furthest one
// taken so far must be held, so slots = max over k of (furthest stream position + 1 - k).
// Sends leave from slots too, in flight until the receiver has them; the runner drives every
// transfer in flight whenever it waits for one, so two ranks sending to each other through a
// full ring cannot block each other.
#include <algorithm>
#include <string>

#include "comm/group_state.h"
#include "comm/wait.h"
#include "sol/error.h"
#include "sol/pp.h"
#include "sol/timing.h"

namespace sol::pp {

namespace {

enum class MessageKind : uint8_t { activation, gradient };

struct MessageKey {
  MessageKind kind;
  int direction, micro_batch;
  bool operator==(const MessageKey&) const = default;
};

std::string describe(const MessageKey& k) {
  return std::string(k.kind == MessageKind::activation ? "activation" : "gradient") + " of micro-batch " +
         std::to_string(k.micro_batch) + " (direction " + std::to_string(k.direction) + ")";
}

int stage_of(int ranks, int rank, int direction) { return direction == 0 ? rank : ranks - 1 - rank; }
// The rank that runs the next stage of `direction` after `rank` (-1: none).
int next_rank(int ranks, int rank, int direction) {
  const int r = direction == 0 ? rank + 1 : rank - 1;
  return r >= 0 && r < ranks ? r : -1;
}
int prev_rank(int ranks, int rank, int direction) { return next_rank(ranks, rank, 1 - direction); }

// What an action of `rank` sends (to whom), or receives (from whom); peer -1: nothing.
struct Transfer {
  int peer = -1;
  MessageKey key{};
};
Transfer sent_by(int ranks, int rank, const Action& a) {
  if (a.kind == Action::forward) return {next_rank(ranks, rank, a.direction), {MessageKind::activation, a.direction, a.micro_batch}};
  if (a.kind == Action::backward_input) return {prev_rank(ranks, rank, a.direction), {MessageKind::gradient, a.direction, a.micro_batch}};
  return {};
}
Transfer received_by(int ranks, int rank, const Action& a) {
  if (a.kind == Action::forward) return {prev_rank(ranks, rank, a.direction), {MessageKind::activation, a.direction, a.micro_batch}};
  if (a.kind == Action::backward_input) return {next_rank(ranks, rank, a.direction), {MessageKind::gradient, a.direction, a.micro_batch}};
  return {};
}

struct Slot {
  Buffer buffer;
  comm::Work work;
  MessageKey key{};
  enum State { free, posted, ready } state = free;
};

// One neighbour: the messages it will send here, in its order, and the slots they land in.
struct Link {
  int peer = -1;
  std::vector<MessageKey> incoming;  // the neighbour's send order
  size_t next_to_post = 0;
  std::vector<Slot> recv_slots, send_slots;
};

}  // namespace

struct Pipeline::Impl {
  comm::Group group;
  PipelineOptions options;
  int ranks, rank;
  std::vector<Action> actions;
  std::vector<Link> links;  // at most two: rank-1 and rank+1
  int recv_slots_needed = 2;

  Impl(const comm::Group& g, const PipelineOptions& o) : group(g), options(o), ranks(g.size()), rank(g.rank()) {
    check(!o.boundary_shape.empty(), "pp", "boundary_shape is empty: give the shape every stage boundary carries");
    for (int64_t d : o.boundary_shape) check(d >= 0, "pp", "boundary_shape has a negative dimension ", d);
    actions = build_schedule(o.schedule, ranks, rank, o.micro_batches);
    for (int peer : {rank - 1, rank + 1}) {
      if (peer < 0 || peer >= ranks) continue;
      Link link;
      link.peer = peer;
      for (const Action& a : build_schedule(o.schedule, ranks, peer, o.micro_batches)) {
        Transfer t = sent_by(ranks, peer, a);
        if (t.peer == rank) link.incoming.push_back(t.key);
      }
      // Slots: the furthest stream position needed so far, less what was already taken.
      size_t furthest = 0, taken = 0;
      int needed = 2;
      for (const Action& a : actions) {
        Transfer t = received_by(ranks, rank, a);
        if (t.peer != peer) continue;
        auto at = std::find(link.incoming.begin(), link.incoming.end(), t.key);
        check(at != link.incoming.end(), "pp", "rank ", peer, "'s schedule never sends ", describe(t.key),
              " that rank ", rank, " needs (internal error)");
        furthest = std::max(furthest, size_t(at - link.incoming.begin()));
        needed = std::max(needed, int(furthest + 1 - taken));
        ++taken;
      }
      recv_slots_needed = std::max(recv_slots_needed, needed);
      for (int i = 0; i < needed; ++i) link.recv_slots.push_back(Slot{Buffer(o.dtype, o.boundary_shape), {}, {}, Slot::free});
      for (int i = 0; i < 2; ++i) link.send_slots.push_back(Slot{Buffer(o.dtype, o.boundary_shape), {}, {}, Slot::free});
      links.push_back(std::move(link));
    }
  }

  Link& link_to(int peer) {
    for (Link& l : links)
      if (l.peer == peer) return l;
    fail("pp", "rank ", rank, " has no link to rank ", peer, " (internal error)");
  }

  // Drives every transfer in flight and posts receives into free slots, in stream order.
  void pump() {
    for (Link& l : links) {
      for (Slot& s : l.send_slots)
        if (s.state == Slot::posted && s.work.completed()) s.state = Slot::free;
      // Receives complete in posting order; post into any free slot, in stream order.
      for (;;) {
        if (l.next_to_post >= l.incoming.size()) break;
        auto free_slot = std::find_if(l.recv_slots.begin(), l.recv_slots.end(), [](const Slot& s) { return s.state == Slot::free; });
        if (free_slot == l.recv_slots.end()) break;
        free_slot->key = l.incoming[l.next_to_post++];
        free_slot->work = group.irecv(free_slot->buffer.tensor(), l.peer);
        free_slot->state = Slot::posted;
      }
      for (Slot& s : l.recv_slots)
        if (s.state == Slot::posted && s.work.completed()) s.state = Slot::ready;
    }
  }

  comm::detail::WaitFor wait_for(int peer, const std::string& what) const {
    comm::detail::GroupState& s = group.state();
    const int pid = s.single_node() && s.shm ? s.shm->pid(peer) : 0;
    return {"pp", s.world_rank_of[size_t(peer)], pid,
            "stage rank " + std::to_string(rank) + " waiting for " + what};
  }

  Slot& await_message(int peer, const MessageKey& key) {
    Link& l = link_to(peer);
    Slot* found = nullptr;
    comm::detail::wait_until(
        [&] {
          pump();
          for (Slot& s : l.recv_slots)
            if (s.state == Slot::ready && s.key == key) found = &s;
          return found != nullptr;
        },
        [&] { return wait_for(peer, describe(key) + " from rank " + std::to_string(peer)); });
    return *found;
  }

  // A send slot that is not in flight; more are added only if the schedule outruns two.
  Slot& free_send_slot(int peer) {
    Link& l = link_to(peer);
    pump();
    for (Slot& s : l.send_slots)
      if (s.state == Slot::free) return s;
    l.send_slots.push_back(Slot{Buffer(options.dtype, options.boundary_shape), {}, {}, Slot::free});
    return l.send_slots.back();
  }

  void drain() {
    comm::detail::wait_until(
        [&] {
          pump();
          for (Link& l : links)
            for (Slot& s : l.send_slots)
              if (s.state == Slot::posted) return false;
          return true;
        },
        [&] {
          for (Link& l : links)
            for (Slot& s : l.send_slots)
              if (s.state == Slot::posted) return wait_for(l.peer, "rank " + std::to_string(l.peer) + " to take " + describe(s.key));
          return wait_for(rank, "its sends");
        });
    for (Link& l : links) {
      l.next_to_post = 0;
      for (Slot& s : l.recv_slots) s.state = Slot::free;
    }
  }

  PipelineStats run(const StageFns& fns) {
    check(bool(fns.forward) && bool(fns.backward_input), "pp", "run: forward and backward_input must be given");
    PipelineStats st;
    int counts[3] = {0, 0, 0};
    double spent[3] = {0, 0, 0};
    const double start = now_seconds();
    for (const Action& a : actions) {
      StageCall call;
      call.stage = stage_of(ranks, rank, a.direction);
      call.direction = a.direction;
      call.micro_batch = a.micro_batch;
      call.first = call.stage == 0;
      call.last = call.stage == ranks - 1;
      const Transfer in = received_by(ranks, rank, a), out = sent_by(ranks, rank, a);
      Slot* in_slot = in.peer >= 0 ? &await_message(in.peer, in.key) : nullptr;
      Slot* out_slot = out.peer >= 0 ? &free_send_slot(out.peer) : nullptr;
      const Tensor none(nullptr, options.dtype, {0});
      const Tensor in_t = in_slot ? in_slot->buffer.tensor() : none;
      const Tensor out_t = out_slot ? out_slot->buffer.tensor() : none;
      const double t0 = now_seconds();
      if (a.kind == Action::forward) fns.forward(call, in_t, out_t);
      else if (a.kind == Action::backward_input) fns.backward_input(call, in_t, out_t);
      else if (fns.backward_weight) fns.backward_weight(call);
      spent[a.kind] += now_seconds() - t0;
      ++counts[a.kind];
      if (in_slot) in_slot->state = Slot::free;
      if (out_slot) {
        out_slot->key = out.key;
        out_slot->work = group.isend(out_slot->buffer.tensor(), out.peer);
        out_slot->state = Slot::posted;
      }
      pump();
    }
    drain();
    st.wall_s = now_seconds() - start;
    st.forward_s = spent[0];
    st.backward_input_s = spent[1];
    st.backward_weight_s = spent[2];
    const double compute = spent[0] + spent[1] + spent[2];
    st.bubble_measured = st.wall_s > 0 ? std::max(0.0, 1 - compute / st.wall_s) : 0;
    // Per micro-batch and stage: a DualPipe rank runs every micro-batch once, over two stages.
    auto mean = [&](int k) { return counts[k] ? spent[k] / counts[k] : 0.0; };
    st.bubble_formula = bubble_formula(options.schedule, ranks, options.micro_batches, mean(0), mean(1), mean(2));
    st.recv_slots = recv_slots_needed;
    return st;
  }
};

Pipeline::Pipeline(const comm::Group& group, const PipelineOptions& options)
    : impl_(std::make_unique<Impl>(group, options)) {}
Pipeline::~Pipeline() = default;

PipelineStats Pipeline::run(const StageFns& fns) { return impl_->run(fns); }
const std::vector<Action>& Pipeline::actions() const { return impl_->actions; }

}  // namespace sol::pp
