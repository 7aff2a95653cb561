"""torch_losses: the LossSpec loss and its gradient on hand-computed numbers (loss-spec.ts's formula)."""
from __future__ import annotations

import math
import unittest

import numpy as np

try:
    import torch

    from arbor_client.torch_losses import policy_loss, sft_loss, validate_loss_spec
except ImportError:  # the pyenv interpreter has numpy but no torch
    torch = None

SKIP = "torch is not installed (run with /usr/bin/python3 or $ARBOR_PYTHON)"


def spec(**kw):
    base = {"ratio": "token", "objective": "clip", "epsLow": 0.2, "epsHigh": 0.2, "normaliser": "token-mean"}
    base.update(kw)
    return base


@unittest.skipIf(torch is None, SKIP)
class PolicyLossTest(unittest.TestCase):
    def run_loss(self, s, lp, old, adv, w, unit=None, trainer_old=None):
        x = torch.tensor(lp, dtype=torch.float64, requires_grad=True)
        a = lambda v: None if v is None else np.asarray(v, dtype=np.float64)  # noqa: E731
        loss, stats = policy_loss(s, x, a(old), a(adv), a(w), a(unit), a(trainer_old))
        loss.backward()
        return loss.item(), x.grad.numpy(), stats

    def test_token_clip(self):
        # d = (0.1, −0.5): ρ = (e^0.1, e^−0.5 ≈ 0.607); the second term (A < 0) takes the clipped side 0.8·A, zero gradient.
        loss, grad, stats = self.run_loss(spec(), [-1.0, -2.0], [-1.1, -1.5], [1.0, -1.0], [0.5, 0.5])
        self.assertAlmostEqual(loss, -(0.5 * math.exp(0.1) - 0.5 * 0.8), places=12)
        np.testing.assert_allclose(grad, [-0.5 * math.exp(0.1), 0.0], rtol=1e-12, atol=0)
        self.assertEqual(stats["clip_fraction"], 0.5)
        self.assertEqual(stats["dual_clip_fraction"], 0.0)

    def test_dual_clip_bounds_a_negative_term_with_a_huge_ratio(self):
        # ρ = e^2 ≈ 7.39, A = −1: min(ρA, 1.2A) = −7.39 < c·A = −3, so f = −3 (constant) and the loss is −w·f.
        loss, grad, stats = self.run_loss(spec(clipRatioC=3), [-1.0, -1.0], [-3.0, -1.05], [-1.0, 2.0], [0.5, 0.25])
        self.assertAlmostEqual(loss, -(0.5 * -3.0 + 0.25 * 2.0 * math.exp(0.05)), places=12)
        np.testing.assert_allclose(grad, [0.0, -0.25 * 2.0 * math.exp(0.05)], rtol=1e-12, atol=0)
        self.assertEqual(stats["dual_clip_fraction"], 0.5)
        # Without the dual clip the same term contributes −w·ρ·A and has a gradient.
        loss2, grad2, _ = self.run_loss(spec(), [-1.0], [-3.0], [-1.0], [0.5])
        self.assertAlmostEqual(loss2, 0.5 * math.exp(2.0), places=12)
        self.assertAlmostEqual(grad2[0], 0.5 * math.exp(2.0), places=12)

    def test_sequence_ratio_is_the_geometric_mean_over_the_unit(self):
        # Unit 0 holds terms 0 and 1: log ρ = (0.2 − 0.4)/2 = −0.1 inside the clip range; unit 1 is term 2 alone.
        loss, grad, stats = self.run_loss(spec(ratio="sequence"), [-1.0, -1.4, -2.0], [-1.2, -1.0, -2.0], [1.0, 1.0, -0.5], [0.25, 0.25, 0.5], unit=[7, 7, 3])
        rho = math.exp(-0.1)
        self.assertAlmostEqual(loss, -(0.5 * rho + 0.5 * -0.5), places=12)
        # d loss / d lp_t = −(Σ_u w·A)·ρ / |u| for each term of the unit.
        np.testing.assert_allclose(grad, [-0.5 * rho / 2, -0.5 * rho / 2, 0.5 * 0.5], rtol=1e-12, atol=0)
        self.assertEqual(stats["units"], 2.0)

    def test_cispo_stops_the_gradient_of_the_clipped_weight(self):
        # ρ = e^0.5 ≈ 1.65 clipped to 1.28: f = 1.28·A·lp, gradient −w·1.28·A (no term from ρ's dependence on lp).
        loss, grad, stats = self.run_loss(spec(objective="cispo", epsLow=1.0, epsHigh=0.28), [-2.0, -1.0], [-2.5, -1.0], [2.0, -1.0], [0.5, 0.5])
        self.assertAlmostEqual(loss, -(0.5 * 1.28 * 2.0 * -2.0 + 0.5 * 1.0 * -1.0 * -1.0), places=12)
        np.testing.assert_allclose(grad, [-0.5 * 1.28 * 2.0, 0.5], rtol=1e-12, atol=0)
        self.assertEqual(stats["clip_fraction"], 0.5)

    def test_mismatch_mask_drops_units_whose_trainer_engine_ratio_exceeds_h(self):
        # Unit 0: exp(mean(trainer_old − old)) = e^1 ≈ 2.72 > 2 → masked; unit 1: e^0.2 → kept.
        s = spec(ratio="chunk", mismatchThreshold=2.0)
        lp, old = [-1.0, -1.0, -1.0], [-2.0, -2.0, -1.2]
        loss, grad, stats = self.run_loss(s, lp, old, [1.0, 1.0, 1.0], [0.25, 0.25, 0.5], unit=[0, 0, 1], trainer_old=[-1.0, -1.0, -1.0])
        rho1 = min(math.exp(0.2), 1.2)
        self.assertAlmostEqual(loss, -0.5 * rho1, places=12)
        np.testing.assert_allclose(grad, [0.0, 0.0, 0.0], atol=0)  # ρ1 = e^0.2 > 1.2 with A > 0: the clipped side
        self.assertEqual(stats["masked_units"], 1.0)
        # Absent trainer_old the current (detached) logprobs are used: here the same values.
        loss2, _, stats2 = self.run_loss(s, lp, old, [1.0, 1.0, 1.0], [0.25, 0.25, 0.5], unit=[0, 0, 1])
        self.assertAlmostEqual(loss2, loss, places=12)
        self.assertEqual(stats2["masked_units"], 1.0)

    def test_float32_matches_float64(self):
        rng = np.random.default_rng(3)
        n = 40
        lp = rng.uniform(-4, -1, n)
        args = (rng.uniform(-4, -1, n).astype(np.float32), rng.normal(size=n).astype(np.float32), rng.uniform(0, 0.1, n).astype(np.float32), rng.integers(0, 5, n))
        for s in (spec(clipRatioC=3), spec(ratio="sequence"), spec(objective="cispo", epsLow=1.0, epsHigh=0.28)):
            l64, _ = policy_loss(s, torch.tensor(lp, dtype=torch.float64), *args)
            l32, _ = policy_loss(s, torch.tensor(lp, dtype=torch.float32), *args)
            self.assertAlmostEqual(l32.item(), l64.item(), delta=1e-5 * max(1.0, abs(l64.item())))

    def test_rejects_bad_specs_and_inputs_naming_the_field(self):
        with self.assertRaisesRegex(ValueError, "clipRatioC applies to objective 'clip' only"):
            validate_loss_spec(spec(objective="cispo", clipRatioC=3))
        with self.assertRaisesRegex(ValueError, "clipRatioC must be a finite number > 1"):
            validate_loss_spec(spec(clipRatioC=1))
        with self.assertRaisesRegex(ValueError, "epsLow"):
            validate_loss_spec(spec(epsLow=-0.1))
        with self.assertRaisesRegex(ValueError, "'sequence' ratio needs each term's unit"):
            policy_loss(spec(ratio="sequence"), torch.zeros(2), np.zeros(2), np.zeros(2), np.zeros(2))
        with self.assertRaisesRegex(ValueError, "advantage has"):
            policy_loss(spec(), torch.zeros(2), np.zeros(2), np.zeros(3), np.zeros(2))


@unittest.skipIf(torch is None, SKIP)
class SftLossTest(unittest.TestCase):
    def test_weighted_negative_log_likelihood(self):
        x = torch.tensor([-1.0, -3.0], dtype=torch.float64, requires_grad=True)
        loss = sft_loss(x, np.array([0.5, 0.25]))
        loss.backward()
        self.assertAlmostEqual(loss.item(), 0.5 + 0.75, places=12)
        np.testing.assert_allclose(x.grad.numpy(), [-0.5, -0.25])


if __name__ == "__main__":
    unittest.main()
