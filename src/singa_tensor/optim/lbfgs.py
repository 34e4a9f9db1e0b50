"""L-BFGS: a quasi-Newton method that keeps the last few curvature pairs, with an optional
strong-Wolfe line search (Nocedal & Wright, Numerical Optimization, algorithms 7.4 and 3.5/3.6).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from .. import _execution, creation
from ..autograd import enable_grad, no_grad
from ..ops.shape import cat
from ..tensor import Tensor
from .optimizer import Optimizer


def _cubic_minimum(x1: float, f1: float, g1: float, x2: float, f2: float, g2: float,
                   bounds: tuple[float, float] | None = None) -> float:
    """The minimizer of the cubic through (x1, f1) and (x2, f2) with slopes g1 and g2,
    clamped to bounds (by default the interval between x1 and x2); the middle of the bounds
    when the cubic has no minimum."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    if x1 == x2:
        return (lo + hi) / 2
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 * d1 - g1 * g2
    if disc < 0:
        return (lo + hi) / 2
    d2 = math.sqrt(disc)
    # written from the left point of the interval, whichever of the two it is
    if x1 > x2:
        x1, f1, g1, x2, f2, g2 = x2, f2, g2, x1, f1, g1
    denom = g2 - g1 + 2 * d2
    if denom == 0 or not math.isfinite(denom):
        return (lo + hi) / 2
    x = x2 - (x2 - x1) * (g2 + d2 - d1) / denom
    if not math.isfinite(x):
        return (lo + hi) / 2
    return min(max(x, lo), hi)


def _strong_wolfe(evaluate: Callable[[float], tuple[float, Tensor]], t: float, d: Tensor,
                  f: float, g: Tensor, gtd: float, c1: float = 1e-4, c2: float = 0.9,
                  tolerance_change: float = 1e-9, max_ls: int = 25
                  ) -> tuple[float, Tensor, float, int]:
    """Find a step t along d satisfying the strong Wolfe conditions,
    f(t) <= f + c1 * t * gtd and |g(t) . d| <= -c2 * gtd: bracket a range that holds one, then
    shrink it by safeguarded cubic interpolation. Returns (f(t), g(t), t, evaluations)."""
    d_norm = d.abs().max().item()
    f_new, g_new = evaluate(t)
    evals = 1
    gtd_new = g_new.dot(d).item()
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    ls_iter = 0
    bracket: list[float] = []
    while ls_iter < max_ls:
        if f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev):
            bracket, bf, bg, bgtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new], \
                [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bf, bg, bgtd = [t], [f_new], [g_new], [gtd_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bf, bg, bgtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new], \
                [gtd_prev, gtd_new]
            break
        # still descending: extrapolate, at least a little and at most tenfold
        t_next = _cubic_minimum(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                                bounds=(t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
        t = t_next
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = g_new.dot(d).item()
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bf, bg, bgtd = [0.0, t], [f, f_new], [g, g_new], [gtd, gtd_new]

    # zoom: keep bracket[low] the best point so far, shrink towards a Wolfe point
    insufficient_progress = False
    low, high = (0, 1) if bf[0] <= bf[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_minimum(bracket[0], bf[0], bgtd[0], bracket[1], bf[1], bgtd[1])
        b_lo, b_hi = min(bracket), max(bracket)
        margin = 0.1 * (b_hi - b_lo)
        if min(b_hi - t, t - b_lo) < margin:
            # too close to an end: step back into the interval unless the last try was not
            if insufficient_progress or t >= b_hi or t <= b_lo:
                t = b_hi - margin if abs(t - b_hi) < abs(t - b_lo) else b_lo + margin
                insufficient_progress = False
            else:
                insufficient_progress = True
        else:
            insufficient_progress = False
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = g_new.dot(d).item()
        ls_iter += 1
        if f_new > f + c1 * t * gtd or f_new >= bf[low]:
            bracket[high], bf[high], bg[high], bgtd[high] = t, f_new, g_new, gtd_new
            low, high = (0, 1) if bf[0] <= bf[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bf[high], bg[high], bgtd[high] = \
                    bracket[low], bf[low], bg[low], bgtd[low]
            bracket[low], bf[low], bg[low], bgtd[low] = t, f_new, g_new, gtd_new
    if len(bracket) == 1:
        low = 0
    return bf[low], bg[low], bracket[low], evals


class LBFGS(Optimizer):
    """L-BFGS with PyTorch's algorithm. Each `step(closure)` runs up to max_iter iterations
    (and max_eval closure evaluations, by default max_iter * 5 // 4): the direction comes from
    the two-loop recursion over the last history_size pairs (s, y) of parameter and gradient
    changes, the step is lr (the first one ever ``min(1, 1 / ||g||_1) * lr``), or, with
    line_search_fn="strong_wolfe", a step satisfying the strong Wolfe conditions. It stops
    early when ``max(abs(g)) <= tolerance_grad``, or when the step or the change of the loss falls
    below tolerance_change.

    The closure must clear the gradients, compute the loss, call backward and return the
    loss. All parameters form one group (no per-parameter options) and are treated as one
    flat vector; the history is kept in the state of the first parameter.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor import optim
        >>> x = st.tensor([3.0, -1.0], dtype=st.float64, requires_grad=True)
        >>> opt = optim.LBFGS([x], line_search_fn="strong_wolfe")
        >>> def closure():
        ...     opt.zero_grad()
        ...     loss = ((x - st.tensor([1.0, 2.0], dtype=st.float64)) ** 2).sum()
        ...     loss.backward()
        ...     return loss
        >>> _ = opt.step(closure)
        >>> [round(v, 6) for v in x.tolist()]
        [1.0, 2.0]
    """

    def __init__(self, params: Iterable, lr: float = 1, max_iter: int = 20,
                 max_eval: int | None = None, tolerance_grad: float = 1e-7,
                 tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None) -> None:
        if max_eval is None:
            max_eval = max_iter * 5 // 4 if isinstance(max_iter, int) else max_eval
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                        tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                        history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)

    def add_param_group(self, param_group: dict) -> None:
        """LBFGS holds exactly one group; a second one is refused."""
        if self.param_groups:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        super().add_param_group(param_group)

    def _check_group(self, group: dict) -> None:
        name = type(self).__name__
        self._check_number(group, "lr", "learning rate")
        self._check_number(group, "tolerance_grad", "tolerance_grad")
        self._check_number(group, "tolerance_change", "tolerance_change")
        for key in ("max_iter", "max_eval", "history_size"):
            v = group[key]
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"{name}: {key} must be a positive integer, got {v!r}")
        if group["line_search_fn"] not in (None, "strong_wolfe"):
            raise ValueError(f"{name}: only 'strong_wolfe' is supported as line_search_fn, "
                             f"got {group['line_search_fn']!r}")

    # ---- the parameters as one flat vector ---------------------------------------------------
    def _params(self) -> list[Tensor]:
        return self.param_groups[0]["params"]

    def _flat_grad(self) -> Tensor:
        parts = []
        for p in self._params():
            g = p.grad
            parts.append(creation.zeros(p.numel(), dtype=p.dtype, device=p.device) if g is None
                         else g.detach().reshape(-1))
        return cat(parts) if len(parts) > 1 else parts[0].clone()

    def _add_to_params(self, t: float, d: Tensor) -> None:
        """params += t * d, with d flat."""
        offset = 0
        for p in self._params():
            n = p.numel()
            p.add_(d[offset:offset + n].reshape(p.shape) * t)
            offset += n

    def _save_params(self) -> list[Tensor]:
        return [p.detach().clone() for p in self._params()]

    def _load_params(self, saved: list[Tensor]) -> None:
        for p, v in zip(self._params(), saved):
            p.copy_(v)

    def _evaluate(self, closure: Callable[[], Any]) -> float:
        with enable_grad():
            return float(closure())

    # ---- the step ----------------------------------------------------------------------------
    def step(self, closure: Callable[[], Any] | None = None):  # type: ignore[override]
        """Run up to max_iter L-BFGS iterations; `closure` (required) re-evaluates the model
        and returns the loss. Returns the loss of the first evaluation."""
        name = type(self).__name__
        if closure is None:
            raise RuntimeError(f"{name}.step requires a closure that clears the gradients, "
                               "computes the loss, calls backward() and returns the loss")
        ex = _execution.current()
        if ex is not None:
            raise RuntimeError(f"{name}.step cannot run under {ex.name}: its number of closure "
                               "evaluations depends on the values computed (call it outside "
                               "the traced or recorded step)")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        history_size = group["history_size"]
        state = self.state[self._params()[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        with enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        evals = 1
        state["func_evals"] += 1
        with no_grad():
            flat_grad = self._flat_grad()
            if flat_grad.abs().max().item() <= tol_grad:
                return orig_loss
            d, t = state.get("d"), state.get("t")
            old_dirs = list(state.get("old_dirs", []))
            old_stps = list(state.get("old_stps", []))
            ro = list(state.get("ro", []))
            h_diag = state.get("H_diag", 1.0)
            prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")

            n_iter = 0
            while n_iter < max_iter:
                n_iter += 1
                state["n_iter"] += 1
                if state["n_iter"] == 1:
                    d = -flat_grad
                    old_dirs, old_stps, ro, h_diag = [], [], [], 1.0
                else:
                    y = flat_grad - prev_flat_grad
                    s = d * t
                    ys = y.dot(s).item()
                    if ys > 1e-10:  # keep the pair only while the curvature is positive
                        if len(old_dirs) == history_size:
                            old_dirs.pop(0)
                            old_stps.pop(0)
                            ro.pop(0)
                        old_dirs.append(y)
                        old_stps.append(s)
                        ro.append(1.0 / ys)
                        h_diag = ys / y.dot(y).item()
                    d = self._two_loop(flat_grad, old_dirs, old_stps, ro, h_diag)
                prev_flat_grad = flat_grad.clone()
                prev_loss = loss

                if state["n_iter"] == 1:
                    t = min(1.0, 1.0 / flat_grad.abs().sum().item()) * lr
                else:
                    t = lr
                gtd = flat_grad.dot(d).item()
                if gtd > -tol_change:  # not a descent direction any more
                    break

                ls_evals = 0
                if group["line_search_fn"] == "strong_wolfe":
                    start = self._save_params()

                    def at(step: float, start=start, d=d) -> tuple[float, Tensor]:
                        self._add_to_params(step, d)
                        f_t = self._evaluate(closure)
                        g_t = self._flat_grad()
                        self._load_params(start)
                        return f_t, g_t

                    loss, flat_grad, t, ls_evals = _strong_wolfe(
                        at, t, d, loss, flat_grad, gtd, tolerance_change=tol_change)
                    self._add_to_params(t, d)
                    opt_cond = flat_grad.abs().max().item() <= tol_grad
                else:
                    self._add_to_params(t, d)
                    opt_cond = False
                    if n_iter != max_iter:
                        # the last iteration's loss is not needed: skip its evaluation
                        loss = self._evaluate(closure)
                        flat_grad = self._flat_grad()
                        opt_cond = flat_grad.abs().max().item() <= tol_grad
                        ls_evals = 1
                evals += ls_evals
                state["func_evals"] += ls_evals

                if n_iter == max_iter or evals >= max_eval or opt_cond:
                    break
                if (d * t).abs().max().item() <= tol_change:
                    break
                if abs(loss - prev_loss) < tol_change:
                    break

        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss

    @staticmethod
    def _two_loop(flat_grad: Tensor, old_dirs: list, old_stps: list, ro: list,
                  h_diag: float) -> Tensor:
        """-H g for the inverse-Hessian estimate H built from the stored pairs."""
        q = -flat_grad
        alphas = [0.0] * len(old_dirs)
        for i in range(len(old_dirs) - 1, -1, -1):
            alphas[i] = old_stps[i].dot(q).item() * ro[i]
            q = q - old_dirs[i] * alphas[i]
        r = q * h_diag
        for i in range(len(old_dirs)):
            beta = old_dirs[i].dot(r).item() * ro[i]
            r = r + old_stps[i] * (alphas[i] - beta)
        return r

    def _restore_value(self, p: Tensor, idx: int, key: str, value):
        if isinstance(value, list):  # the history: lists of flat vectors and floats
            return [self._restore_value(p, idx, key, v) for v in value]
        return super()._restore_value(p, idx, key, value)
