"""The counter under `grpo-guard trace`: the live storage bytes of a traced step, their peak, and the ordered
allocation and free events the caching-allocator model (memory/allocator.py) replays for the reserved figure.
Storages are counted once and released by a weakref finalizer on the storage object (see memory/trace.py)."""

from __future__ import annotations

import weakref

GiB = 2**30


class LiveBytes:
    """Live storage bytes under a dispatch mode: current total, peak, and which storages were live at the peak."""

    def __init__(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        counter = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                counter.after(func, out, args)
                return out

        self.mode = _Mode()
        self.live: dict[int, tuple[int, int, bool]] = {}
        """id(storage) -> (serial, bytes, made with grad enabled) for every live storage (the serial tells apart two
        storages that had the same id at different times). Grad mode tells an activation from a temporary: forward
        passes that build the graph (the step's forward, and a checkpointed layer's recompute, which
        torch.utils.checkpoint runs under enable_grad inside backward) run with it on; backward kernels, no-grad
        passes (the reference pass) and the optimizer with it off."""
        self.serial = 0
        self.total = 0
        self.peak = 0
        self.peak_live: dict[int, tuple[int, int]] = {}
        self.peak_at = ''
        self.stage = ''
        self.window_base: int | None = None
        self.window_peak = 0
        self.events: list = []
        """Every allocation ``(serial, bytes)`` and free ``(serial, None)`` in order, for the caching-allocator
        simulator (``allocator.replay``): what the trace's ``reserved`` figure is computed from. One correction: any
        Python dispatch mode (this counter, FakeTensorMode) makes autograd take the out-of-place path that it keeps for
        tensor subclasses, so ``gather``'s backward (torch/csrc/autograd/FunctionsManual.cpp ``gather_backward``:
        ``new_zeros`` then ``scatter_add_`` unless ``areAnyTensorSubclassLike``) allocates a second full-size buffer
        that
        the uninstrumented GPU step writes in place; the events record that ``scatter_add`` as in place."""
        self.event_stages: list[str] = []  # the stage at each event (trace --snapshot's frames)
        self.zeros: set[int] = set()  # serials made by aten.new_zeros
        self.event_id: dict[int, int] = {}  # serial -> the event id it frees (an in-place result frees its input's)
        self.silent: set[int] = set()  # serials whose block lives on in an in-place result
        self.step_peak = 0
        """Largest rise over the live bytes at the start of a loss computation, through its backward (what the
        trainer step allocates on top of the weights, gradients and optimizer state already there)."""

    def _release(self, key: int, serial: int) -> None:
        entry = self.live.get(key)
        if entry is not None and entry[0] == serial:
            del self.live[key]
            self.total -= entry[1]
            if serial in self.silent:
                self.silent.discard(serial)
            else:
                self.events.append((self.event_id.pop(serial, serial), None))
                self.event_stages.append(self.stage)

    def track(self, t, reuse: int | None = None) -> None:
        import torch

        st = t.untyped_storage()
        key = id(st)
        if key in self.live:
            return
        n = st.nbytes()
        self.serial += 1
        self.live[key] = (self.serial, n, torch.is_grad_enabled())
        if reuse is None:
            self.events.append((self.serial, n))
            self.event_stages.append(self.stage)
        else:
            self.event_id[self.serial] = self.event_id.get(reuse, reuse)
            self.silent.add(reuse)
        self.total += n
        weakref.finalize(st, self._release, key, self.serial)

    def after(self, func, out, args=()) -> None:
        import torch
        from torch.utils._pytree import tree_flatten

        reuse = None
        if func is torch.ops.aten.scatter_add.default and args and isinstance(args[0], torch.Tensor):
            entry = self.live.get(id(args[0].untyped_storage()))
            reuse = entry[0] if entry is not None and entry[0] in self.zeros else None
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.track(t, reuse)
                if func is torch.ops.aten.new_zeros.default:
                    self.zeros.add(self.serial)
        if self.window_base is not None and self.total > self.window_peak:
            self.window_peak = self.total
        if self.total > self.peak:
            self.peak = self.total
            self.peak_live = dict(self.live)
            self.peak_at = f'{self.stage}: {func}'

    def open_window(self) -> None:
        self.window_base = self.window_peak = self.total

    def close_window(self) -> None:
        if self.window_base is not None:
            self.step_peak = max(self.step_peak, self.window_peak - self.window_base)
        self.window_base = None

    def keys_of(self, tensors) -> set[tuple[int, int]]:
        """(id, serial) of the storages of ``tensors`` (alive now, so tracked now)."""
        out = set()
        for t in tensors:
            if t is not None:
                key = id(t.untyped_storage())
                if key in self.live:
                    out.add((key, self.live[key][0]))
        return out
