#!/usr/bin/env python3
"""ctest driver: normlab's optimisers against torch.optim (Lion: lion-pytorch; schedule-free AdamW: schedulefree) on the same gradients.

Draws a few parameter tensors and ten steps of gradients (one parameter has no gradient at
step 3, as a parameter unused by a batch), with a different learning rate every step, runs the
reference optimiser of --case on them (torch.optim's, or lucidrains' lion-pytorch for Lion;
torch.optim.Muon on the matrices the muon cases name and torch.optim.AdamW on the rest), has
normlab replay the same sequence (tests/train/optimizer_replay.cpp), and fails unless every parameter after every step, every
recorded update (p_new - p_old) and, with clipping, every gradient norm agree to relative
error < 1e-12 in float64 (1e-6 in float32).

normlab runs Adam and AdamW through ATen's fused kernel (torch.optim's fused=True). The float64
cases hold it to torch.optim's single-tensor code, an independent writing of the same formulas
(they differ by rounding only); in float32 the recorded updates (p_new - p_old, a difference of
close numbers) keep 1e-6 only against the same order of operations, so the float32 case's
reference is torch.optim.AdamW(fused=True).

Schedule-free AdamW (schedulefree.AdamWScheduleFree, PyPI schedulefree) is checked at both of
its points: y (the parameters while training) after every step, and x (its average, where the
model is evaluated) after the steps of EVALUATE, where both sides move to x and back (the
reference's eval() and train(); normlab's to_evaluation_point() and to_training_point()), as
training does around validation. The reload case also resumes normlab through a file at x, as from
a checkpoint, and requires it to agree bit for bit with the same run uninterrupted.

Muon orthogonalises in bfloat16 (torch's _zeropower_via_newtonschulz); normlab makes the same ATen
calls in the same order, so its matrices agree with torch.optim.Muon's to the bit in float64 and
float32 alike (the tolerances above hold with no allowance for bfloat16).
"""

import argparse
import math
import subprocess
import sys
from pathlib import Path

import torch

STEPS = 10
SHAPES = {"encoder.fc1.weight": (3, 4), "encoder.fc1.bias": (4,), "decoder.attn.w": (2, 3, 2)}
MISSING = (3, "encoder.fc1.bias")  # (step, parameter) without a gradient
WD = 0.01
BETAS = (0.9, 0.98)
EPS = 1e-8
PEAK = 0.075  # the largest of the rates below (0.05 (1 + 0.5 sin k)), as a schedule's peak --lr
WD_INDEPENDENT = 0.05  # independent decay: p *= 1 - 0.05 lr_t / PEAK, up to 5% a step
LION_BETAS = (0.9, 0.99)
LION_WD = 0.5  # Lion's lr is 3-10x below AdamW's, its wd as much above (Chen et al. 2023 §5)
# Muon's cases: two hidden matrices (one tall, A > B: transposed inside Newton-Schulz, and
# s = sqrt(A/B) > 1 for original; one wide), written out here by hand as Muon's, not taken from
# normlab's rule; an embedding, an output layer and a bias, AdamW's. A matrix misses its gradient
# at one step too.
MUON_SHAPES = {"encoder.embed_tokens.weight": (7, 4), "encoder.layers.0.fc1.weight": (6, 4),
               "encoder.layers.0.fc1.bias": (6,), "decoder.layers.0.self_attn.out_proj.weight": (3, 5),
               "decoder.output_projection.weight": (7, 4)}
MUON_MATRICES = ("encoder.layers.0.fc1.weight", "decoder.layers.0.self_attn.out_proj.weight")
MUON_MISSING = {(3, "encoder.layers.0.fc1.bias"), (5, "encoder.layers.0.fc1.weight")}
MUON_BETAS = (0.9, 0.95)  # normlab's muon without --betas (Jordan et al.'s and Moonlight's AdamW)
MUON_WD = 0.1  # Moonlight's (Liu et al. 2025), torch.optim.Muon's default
SF_BETAS = (0.9, 0.999)  # normlab's adamw-schedulefree without --betas (schedulefree's default)
SF_WD = 0.05  # at y, in the normalised step (schedulefree's weight_decay)
SF_ARGS = ["--optimizer", "adamw-schedulefree", "--betas", "0.9,0.999", "--eps", str(EPS)]

# case -> (normlab arguments, torch optimiser factory, dtype, clip norm or None)
CASES = {
    "sgd": (["--optimizer", "sgd", "--momentum", "0.9", "--weight-decay", str(WD)],
            lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=WD),
            torch.float64, None),
    "sgd-nesterov": (["--optimizer", "sgd", "--momentum", "0.9", "--nesterov"],
                     lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
                     torch.float64, None),
    "sgd-plain-clip": (["--optimizer", "sgd", "--clip-norm", "1.5"],
                       lambda p: torch.optim.SGD(p, lr=0.1), torch.float64, 1.5),
    "adam": (["--optimizer", "adam", "--betas", "0.9,0.98", "--eps", str(EPS),
              "--weight-decay", str(WD)],
             lambda p: torch.optim.Adam(p, lr=0.1, betas=BETAS, eps=EPS, weight_decay=WD),
             torch.float64, None),
    "adamw": (["--optimizer", "adamw", "--betas", "0.9,0.98", "--eps", str(EPS),
               "--weight-decay", str(WD)],
              lambda p: torch.optim.AdamW(p, lr=0.1, betas=BETAS, eps=EPS, weight_decay=WD),
              torch.float64, None),
    "adamw-float32-clip": (["--optimizer", "adamw", "--betas", "0.9,0.98", "--eps", str(EPS),
                            "--weight-decay", str(WD), "--clip-norm", "1.5"],
                           lambda p: torch.optim.AdamW(p, lr=0.1, betas=BETAS, eps=EPS,
                                                       weight_decay=WD, fused=True),
                           torch.float32, 1.5),
    "adamw-gi": (["--optimizer", "adamw", "--betas", "0.9,0.98", "--eps", str(EPS),
                  "--weight-decay", str(WD), "--adam-init-v", "grad-squared"],
                 lambda p: GIAdamW(p, lr=0.1, betas=BETAS, eps=EPS, weight_decay=WD),
                 torch.float64, None),
    # torch's RAdam has no "skip" mode; with decoupled weight decay its non-rectified update is
    # the authors' degenerated_to_sgd. Steps 1-5 fall back, 6-10 are rectified (beta2 0.98).
    "radam-sgd": (["--optimizer", "radam", "--betas", "0.9,0.98", "--eps", str(EPS),
                   "--weight-decay", str(WD), "--radam-fallback", "sgd"],
                  lambda p: torch.optim.RAdam(p, lr=0.1, betas=BETAS, eps=EPS, weight_decay=WD,
                                              decoupled_weight_decay=True),
                  torch.float64, None),
    # Chen et al. 2023 against lucidrains' lion-pytorch (PyPI lion-pytorch, scripts/install-deps),
    # with its (the paper's) betas and decoupled weight decay; float32 in the same operations.
    "lion": (["--optimizer", "lion", "--betas", "0.9,0.99", "--weight-decay", str(LION_WD)],
             lambda p: lion(p, lr=0.1, betas=LION_BETAS, weight_decay=LION_WD),
             torch.float64, None),
    # Wortsman et al. 2023's independent decay, p *= 1 - wd lr_t / lr_peak: AdamW against a
    # hand-written torch reference (the decay by hand, then torch.optim.AdamW without decay),
    # Lion against lion-pytorch's decoupled_weight_decay=True (wd / its initial lr, here PEAK).
    "adamw-independent": (["--optimizer", "adamw", "--betas", "0.9,0.98", "--eps", str(EPS),
                           "--weight-decay", str(WD_INDEPENDENT), "--weight-decay-mode", "independent",
                           "--peak-lr", str(PEAK)],
                          lambda p: IndependentDecay(torch.optim.AdamW(p, lr=0.1, betas=BETAS, eps=EPS,
                                                                       weight_decay=0.0),
                                                     WD_INDEPENDENT, PEAK),
                          torch.float64, None),
    "lion-independent": (["--optimizer", "lion", "--betas", "0.9,0.99", "--weight-decay", str(WD_INDEPENDENT),
                          "--weight-decay-mode", "independent", "--peak-lr", str(PEAK)],
                         lambda p: lion(p, lr=PEAK, betas=LION_BETAS, weight_decay=WD_INDEPENDENT,
                                        decoupled_weight_decay=True),
                         torch.float64, None),
    "lion-float32-clip": (["--optimizer", "lion", "--betas", "0.9,0.99", "--weight-decay", str(LION_WD),
                           "--clip-norm", "1.5"],
                          lambda p: lion(p, lr=0.1, betas=LION_BETAS, weight_decay=LION_WD),
                          torch.float32, 1.5),
    # Muon (torch.optim.Muon) on MUON_MATRICES, torch.optim.AdamW on the rest: normlab's default
    # --muon-adjust-lr match-rms-adamw (Liu et al. 2025) with torch's other defaults; then every
    # Muon option changed, with torch's default scaling "original" (Jordan et al. 2024); float32
    # with clipping (the AdamW part fused, as in adamw-float32-clip).
    "muon": (["--optimizer", "muon", "--betas", "0.9,0.95", "--eps", str(EPS), "--weight-decay", str(MUON_WD)],
             lambda p: MuonAdamW(p, dict(weight_decay=MUON_WD, adjust_lr_fn="match_rms_adamw"),
                                 dict(betas=MUON_BETAS, eps=EPS, weight_decay=MUON_WD)),
             torch.float64, None),
    "muon-original": (["--optimizer", "muon", "--betas", "0.9,0.95", "--eps", str(EPS), "--weight-decay", str(MUON_WD),
                       "--muon-adjust-lr", "original", "--muon-nesterov=false", "--muon-momentum", "0.9",
                       "--muon-ns-steps", "4"],
                      lambda p: MuonAdamW(p, dict(weight_decay=MUON_WD, adjust_lr_fn="original", nesterov=False,
                                                  momentum=0.9, ns_steps=4),
                                          dict(betas=MUON_BETAS, eps=EPS, weight_decay=MUON_WD)),
                      torch.float64, None),
    "muon-float32-clip": (["--optimizer", "muon", "--betas", "0.9,0.95", "--eps", str(EPS),
                           "--weight-decay", str(MUON_WD), "--clip-norm", "5"],
                          lambda p: MuonAdamW(p, dict(weight_decay=MUON_WD, adjust_lr_fn="match_rms_adamw"),
                                              dict(betas=MUON_BETAS, eps=EPS, weight_decay=MUON_WD, fused=True)),
                          torch.float32, 5.0),
    # Independent decay, p *= 1 - wd lr_t / lr_peak, on both parts, written out as for adamw.
    "muon-independent": (["--optimizer", "muon", "--betas", "0.9,0.95", "--eps", str(EPS),
                          "--weight-decay", str(WD_INDEPENDENT), "--weight-decay-mode", "independent",
                          "--peak-lr", str(PEAK)],
                         lambda p: IndependentDecay(MuonAdamW(p, dict(weight_decay=0.0, adjust_lr_fn="match_rms_adamw"),
                                                              dict(betas=MUON_BETAS, eps=EPS, weight_decay=0.0)),
                                                    WD_INDEPENDENT, PEAK),
                         torch.float64, None),
    # Defazio et al. 2024 against schedulefree.AdamWScheduleFree: its own warm-up over 4 of the
    # 10 steps with decay; float32 with clipping; the average's weights (k+1)^r lr_max^p with r and
    # p changed and no warm-up; a resume at x after step 5 (RELOAD).
    "adamw-schedulefree": (SF_ARGS + ["--weight-decay", str(SF_WD), "--warmup-steps", "4"],
                           lambda p: schedule_free(p, weight_decay=SF_WD, warmup_steps=4),
                           torch.float64, None),
    "adamw-schedulefree-float32-clip": (SF_ARGS + ["--weight-decay", str(SF_WD), "--warmup-steps", "3",
                                                   "--clip-norm", "1.5"],
                                        lambda p: schedule_free(p, weight_decay=SF_WD, warmup_steps=3),
                                        torch.float32, 1.5),
    "adamw-schedulefree-weighting": (SF_ARGS + ["--schedule-free-r", "1", "--schedule-free-weight-lr-power", "1",
                                                "--warmup-steps", "0"],
                                     lambda p: schedule_free(p, r=1.0, weight_lr_power=1.0),
                                     torch.float64, None),
    "adamw-schedulefree-reload": (SF_ARGS + ["--weight-decay", str(SF_WD), "--warmup-steps", "4"],
                                  lambda p: schedule_free(p, weight_decay=SF_WD, warmup_steps=4),
                                  torch.float64, None),
}

# Schedule-free cases: the steps after which x is recorded (both sides move to x and back), and
# the step after which normlab resumes through a file (at x, as from a checkpoint). Never step 2:
# the parameter without a gradient at step 3 must stay where step 2's round trip leaves it.
EVALUATE = {"adamw-schedulefree": (4, 7, 10), "adamw-schedulefree-float32-clip": (5, 10),
            "adamw-schedulefree-weighting": (1, 6, 10), "adamw-schedulefree-reload": (5, 10)}
RELOAD = {"adamw-schedulefree-reload": 5}


# The independent cases' optimiser with decay at the step's rate (torch's AdamW, lion-pytorch's
# default): the test data must tell the two modes apart.
COUPLED = {
    "adamw-independent": lambda p: torch.optim.AdamW(p, lr=0.1, betas=BETAS, eps=EPS, weight_decay=WD_INDEPENDENT),
    "lion-independent": lambda p: lion(p, lr=PEAK, betas=LION_BETAS, weight_decay=WD_INDEPENDENT),
    "muon-independent": lambda p: MuonAdamW(p, dict(weight_decay=WD_INDEPENDENT, adjust_lr_fn="match_rms_adamw"),
                                            dict(betas=MUON_BETAS, eps=EPS, weight_decay=WD_INDEPENDENT)),
}


def shapes_of(case):
    """The parameters (name -> shape) and the (step, name) pairs without a gradient of `case`."""
    return (MUON_SHAPES, MUON_MISSING) if case.startswith("muon") else (SHAPES, {MISSING})


class MuonAdamW:
    """torch.optim.Muon (Jordan et al. 2024; Liu et al. 2025) on MUON_MATRICES and torch.optim.AdamW
    on the other parameters of MUON_SHAPES (given in its order), at one rate: what Jordan et al.'s
    MuonWithAuxAdam and Moonlight's Muon do with one lr. torch's Muon takes 2-D parameters only."""

    def __init__(self, params, muon_kw, adamw_kw):
        names = list(MUON_SHAPES)
        assert len(names) == len(params)
        self.muon = torch.optim.Muon([p for n, p in zip(names, params) if n in MUON_MATRICES], lr=0.1, **muon_kw)
        self.adamw = torch.optim.AdamW([p for n, p in zip(names, params) if n not in MUON_MATRICES], lr=0.1,
                                       **adamw_kw)
        self.param_groups = self.muon.param_groups + self.adamw.param_groups

    @torch.no_grad()
    def step(self):
        self.muon.step()
        self.adamw.step()


class IndependentDecay:
    """Wortsman et al. 2023 (arXiv 2309.14322), "independent" weight decay written out: every
    parameter with a gradient is multiplied by 1 - wd * s_t, s_t = lr_t / lr_peak the schedule's
    multiplier, before the wrapped optimiser (without decay of its own) steps; torch.optim.AdamW
    decays before its update too, so with weight_decay = wd it would be s_t = lr_t."""

    def __init__(self, optimizer, wd, peak_lr):
        self.optimizer, self.wd, self.peak_lr = optimizer, wd, peak_lr
        self.param_groups = optimizer.param_groups

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.mul_(1.0 - self.wd * (group["lr"] / self.peak_lr))
        self.optimizer.step()


class ScheduleFreeAtY:
    """schedulefree.AdamWScheduleFree (Defazio et al. 2024) with SF_BETAS and EPS, put in train mode
    (its parameters at y) before its first step, as its README asks; eval()/train() move them to x
    and back."""

    def __init__(self, params, **kw):
        from schedulefree import AdamWScheduleFree  # only the schedule-free cases need the package
        self.optimizer = AdamWScheduleFree(params, lr=0.1, betas=SF_BETAS, eps=EPS, **kw)
        self.optimizer.train()
        self.param_groups = self.optimizer.param_groups

    @torch.no_grad()
    def step(self):
        # schedulefree divides the gradient in place; run_torch's gradients are clones, normlab's untouched.
        self.optimizer.step()

    def eval(self):
        self.optimizer.eval()

    def train(self):
        self.optimizer.train()


def schedule_free(params, **kw):
    return ScheduleFreeAtY(params, **kw)


def lion(params, **kw):
    from lion_pytorch import Lion  # only the lion cases need the package
    return Lion(params, **kw)


class GIAdamW(torch.optim.AdamW):
    """GI-Adam (Kalra & Barkeshli 2024, REFERENCE §9): v_0 = g_0^2, written into torch's own
    state before its first step (torch then computes v_1 = beta2 v_0 + (1 - beta2) g_0^2)."""

    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None and len(self.state[p]) == 0:
                    self.state[p] = {"step": torch.tensor(0.0), "exp_avg": torch.zeros_like(p),
                                     "exp_avg_sq": p.grad.detach().square()}
        return super().step()


def make_inputs(dtype, shapes, missing):
    g = torch.Generator().manual_seed(1234)
    params = {n: torch.randn(s, generator=g, dtype=torch.float64).to(dtype) for n, s in shapes.items()}
    grads = {}
    for k in range(1, STEPS + 1):
        scale = 0.2 * k  # total norms from about 0.5 to 5 (muon: 2 to 20): some steps clip, some do not
        for n, s in shapes.items():
            if (k, n) not in missing:
                grads[(k, n)] = (scale * torch.randn(s, generator=g, dtype=torch.float64)).to(dtype)
    lrs = torch.tensor([0.05 * (1.0 + 0.5 * math.sin(k)) for k in range(1, STEPS + 1)],
                       dtype=torch.float64)
    return params, grads, lrs


def run_torch(params, grads, lrs, factory, clip, evaluate_at=()):
    ps = {n: t.clone().requires_grad_(True) for n, t in params.items()}
    opt = factory(list(ps.values()))
    after, updates, norms, xs = {}, {}, [], {}
    for k in range(1, STEPS + 1):
        for n, p in ps.items():
            p.grad = grads[(k, n)].clone() if (k, n) in grads else None
        if clip is not None:
            norms.append(float(torch.nn.utils.clip_grad_norm_(list(ps.values()), clip)))
        before = {n: p.detach().clone() for n, p in ps.items()}
        for group in opt.param_groups:
            group["lr"] = float(lrs[k - 1])
        opt.step()
        for n, p in ps.items():
            after[(k, n)] = p.detach().clone()
            if (k, n) in grads:
                updates[(k, n)] = p.detach() - before[n]
        if k in evaluate_at:
            opt.eval()
            for n, p in ps.items():
                xs[(k, n)] = p.detach().clone()
            opt.train()
    return after, updates, norms, xs


def rel_err(a, b):
    scale = b.abs().max().item()
    return (a.double() - b.double()).abs().max().item() / (scale if scale > 0 else 1.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replay", required=True, help="optimizer_replay executable")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--case", required=True, choices=sorted(CASES))
    args = ap.parse_args()
    nl_args, factory, dtype, clip = CASES[args.case]
    tol = 1e-12 if dtype == torch.float64 else 1e-6
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)

    params, grads, lrs = make_inputs(dtype, *shapes_of(args.case))
    inputs = {f"param.{n}": t for n, t in params.items()}
    inputs.update({f"grad.{k}.{n}": t for (k, n), t in grads.items()})
    inputs["lr"] = lrs
    torch.save(inputs, work / "in.pt")  # torch.save's default format, read by load_tensors
    evaluate_at = EVALUATE.get(args.case, ())
    replay = [args.replay, "--in", str(work / "in.pt")] + nl_args
    replay += [a for k in evaluate_at for a in ("--evaluate-at", str(k))]
    subprocess.run(replay + ["--out", str(work / "out.pt")], check=True)
    got = torch.load(work / "out.pt", weights_only=True)
    after, updates, norms, xs = run_torch(params, grads, lrs, factory, clip, evaluate_at)

    failures, worst = [], 0.0
    if args.case in RELOAD:  # resumed at x through a file: bit for bit the run above
        subprocess.run(replay + ["--reload-at", str(RELOAD[args.case]), "--out", str(work / "reloaded.pt")],
                       check=True)
        reloaded = torch.load(work / "reloaded.pt", weights_only=True)
        if reloaded.keys() != got.keys():
            failures.append(f"resumed run's outputs {sorted(reloaded.keys() ^ got.keys())} differ")
        failures += [f"{key}: resumed run differs from the uninterrupted one" for key in sorted(got)
                     if key in reloaded and not torch.equal(got[key], reloaded[key])]
    def check(what, a, b):
        nonlocal worst
        if a.dtype != b.dtype or a.shape != b.shape:
            failures.append(f"{what}: {a.dtype}{tuple(a.shape)} vs torch {b.dtype}{tuple(b.shape)}")
            return
        e = rel_err(a, b)
        worst = max(worst, e)
        if not e < tol:
            failures.append(f"{what}: relative error {e:.3g}")

    for (k, n), ref in after.items():
        check(f"param {n} after step {k}", got[f"param.{k}.{n}"], ref)
        moved = (ref.double() - (after[(k - 1, n)] if k > 1 else params[n]).double()).abs().max()
        if (k, n) not in grads and moved != 0:
            failures.append(f"torch moved {n} at step {k} without a gradient?")
    for (k, n), ref in updates.items():
        check(f"update of {n} at step {k}", got[f"update.{k}.{n}"], ref)
    for (k, n), ref in xs.items():
        check(f"x of {n} after step {k}", got[f"x.{k}.{n}"], ref)
        if k == STEPS and (ref - after[(k, n)]).abs().max() == 0:
            failures.append(f"x and y of {n} agree: the test does not tell the two points apart")
    extra = {k for k in got if k.startswith("update.")} - {f"update.{k}.{n}" for k, n in updates}
    if extra:
        failures.append(f"updates recorded for parameters without a gradient: {sorted(extra)}")
    if clip is not None:
        ref = torch.tensor(norms, dtype=torch.float64)
        check("clip_grad_norm", got["norm"], ref)
        clipped = sum(n > clip for n in norms)
        if not 0 < clipped < STEPS:
            failures.append(f"test data clip {clipped} of {STEPS} steps; want some and not all")
    # The data must exercise the optimiser: parameters really move.
    if all((after[(STEPS, n)] - params[n]).abs().max() == 0 for n in params):
        failures.append("no parameter moved")
    if args.case in COUPLED:
        coupled, _, _, _ = run_torch(params, grads, lrs, COUPLED[args.case], clip)
        apart = max(rel_err(coupled[(STEPS, n)], after[(STEPS, n)]) for n in params)
        if not apart > 1e-3:
            failures.append(f"decay at lr_t and at lr_t / lr_peak end only {apart:.3g} apart")

    print(f"{args.case}: {len(after)} parameter states, {len(updates)} updates, {len(xs)} evaluation points, "
          f"worst relative error {worst:.3g} (tolerance {tol:g})")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
