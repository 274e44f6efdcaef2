// UvHandle<T>: the one owner of a libuv handle (uv_tcp_t, uv_timer_t, uv_async_t, uv_signal_t).
//
// libuv keeps using a handle's memory after uv_close() until the close callback has run, on a
// later loop turn, so a handle embedded in an object that is destroyed first is a use after
// free. UvHandle puts the handle on the heap and gives it one close path:
//
//   init(loop, owner, uv_*_init)  allocates the handle, runs the init function, handle->data = owner
//   close(on_closed)              uv_close once (later calls do nothing); on_closed(owner) runs
//                                 from libuv's close callback, then the memory is freed there
//   ~UvHandle()                   the same close, with no callback: the owner may go first
//
// After the owner's destructor, nothing reaches it: handle->data is cleared, the close
// notification is dropped, and a callback libuv still delivers for a request on the handle (a
// cancelled uv_write) finds data == nullptr. Every libuv handle in kproxy is one of these, so
// "who closes this, and when is it freed" has one answer (tests/unit/proxy/net/uv_handle_test.cc
// closes each kind and checks that the loop then closes cleanly).
#pragma once

#include <concepts>
#include <utility>

#include <uv.h>

namespace kproxy::net {

/// The libuv handle types kproxy owns.
template <typename T>
concept UvHandleType =
    std::same_as<T, uv_tcp_t> || std::same_as<T, uv_timer_t> || std::same_as<T, uv_async_t> || std::same_as<T, uv_signal_t>;

template <UvHandleType T>
class UvHandle {
 public:
  /// Runs on the loop thread once libuv has finished closing the handle.
  using ClosedFn = void (*)(void* owner);

  UvHandle() = default;
  ~UvHandle() { release(); }
  UvHandle(const UvHandle&) = delete;
  UvHandle& operator=(const UvHandle&) = delete;

  /// Allocates the handle and runs `init(loop, handle, args...)` (uv_tcp_init, uv_timer_init,
  /// uv_async_init with its callback, …); the handle's data points at `owner`. Returns the init
  /// function's result; on failure nothing is allocated. Not while a handle is held (after
  /// reset(), or once libuv closed the last one, it may be called again).
  template <typename Init, typename... Args>
  int init(uv_loop_t* loop, void* owner, Init init_fn, Args&&... args) {
    auto* box = new Box{};
    int rc = init_fn(loop, &box->handle, std::forward<Args>(args)...);
    if (rc < 0) {
      delete box;
      return rc;
    }
    box->handle.data = owner;
    box->wrapper = this;
    box_ = box;
    return rc;
  }

  /// The handle, or nullptr before init() and after libuv closed it.
  T* get() const { return box_ ? &box_->handle : nullptr; }
  uv_handle_t* base() const { return box_ ? reinterpret_cast<uv_handle_t*>(&box_->handle) : nullptr; }
  uv_stream_t* stream() const requires std::same_as<T, uv_tcp_t> { return box_ ? reinterpret_cast<uv_stream_t*>(&box_->handle) : nullptr; }

  /// init() succeeded and close() was not called.
  bool open() const { return box_ && !uv_is_closing(base()); }
  /// close() was called and libuv has not finished yet.
  bool closing() const { return box_ && uv_is_closing(base()); }

  /// Lets go of the handle as the destructor does (closed without a callback, freed by libuv's
  /// close callback); afterwards get() is nullptr and init() may run again.
  void reset() { release(); }

  /// Closes the handle once (pending requests on it are cancelled by libuv); `on_closed(owner)`
  /// runs when libuv is done. A UvHandle that was never initialized calls nothing.
  void close(ClosedFn on_closed = nullptr) {
    if (!box_ || uv_is_closing(base())) return;
    box_->on_closed = on_closed;
    uv_close(reinterpret_cast<uv_handle_t*>(&box_->handle), after_close);
  }

 private:
  // Every connection holds two of these: no more than the handle and two pointers (whether it
  // is closing is libuv's own flag, uv_is_closing; the owner is handle.data until release()).
  struct Box {
    T handle;  ///< first member: libuv hands back a pointer to it
    UvHandle* wrapper = nullptr;
    ClosedFn on_closed = nullptr;  ///< null after release(): nobody to tell
  };

  static void after_close(uv_handle_t* h) {
    auto* box = reinterpret_cast<Box*>(h);
    if (box->wrapper) box->wrapper->box_ = nullptr;
    ClosedFn notify = box->on_closed;
    void* owner = box->handle.data;  // the owner whenever there is someone to notify
    delete box;
    if (notify) notify(owner);  // may destroy the owner, and this UvHandle with it
  }

  /// The owner is going away: close without telling it.
  void release() {
    if (!box_) return;
    box_->wrapper = nullptr;
    box_->on_closed = nullptr;
    box_->handle.data = nullptr;
    if (!uv_is_closing(base())) uv_close(reinterpret_cast<uv_handle_t*>(&box_->handle), after_close);
    box_ = nullptr;
  }

  Box* box_ = nullptr;
};

}  // namespace kproxy::net
