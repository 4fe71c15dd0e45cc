//! The ε lower bound of one-run auditing: from "v of r guesses were right" to ε_lower.
//!
//! Part of the audit room; pure maths, no model, data or training imports.
//!
//! Steinke, Nasr & Jagielski 2023, "Privacy Auditing with One (1) Training Run" (NeurIPS 2023),
//! Theorem 5.2: let a mechanism be (ε, δ)-DP with respect to each of m canaries, each included
//! independently with probability 1/2, and let an auditor, after seeing the output, guess
//! "included" or "excluded" for r of them (abstaining on the rest). Then the number W of correct
//! guesses satisfies, for every v,
//!
//! ```text
//! P[W ≥ v] ≤ f(v) + 2mδ · max_{i = 1..v} (f(v − i) − f(v)) / i,
//! f(v) = P[Binomial(r, p_ε) ≥ v],   p_ε = e^ε / (1 + e^ε),
//! ```
//!
//! (f(v − i) − f(v) = P[v − i ≤ Binomial(r, p_ε) < v]). With δ = 0 this is their Theorem 3.1:
//! an ε-DP mechanism makes the guesses no better than randomized response with accuracy p_ε.
//!
//! [`p_value`] evaluates the right-hand side exactly (binomial terms in log space, no normal
//! approximation), as the paper's own numerical procedure does; [`epsilon_lower_bound`] returns
//! the largest ε whose p-value at the observed v is below β = 1 − confidence: if the mechanism
//! were ε-DP for any ε ≤ ε_lower, so many correct guesses would have had probability < β. With
//! probability at least 1 − β over the canaries and the mechanism, the true ε is ≥ ε_lower.

use crate::privacy::special::{ln_gamma, log_add_exp};

/// Largest ε the search considers; a bound this large means "every guess right" for a huge r.
pub const EPSILON_SEARCH_MAX: f64 = 200.0;

/// Why a bound cannot be computed from the given counts.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BoundError {
    #[error(
        "counts must satisfy correct ≤ guesses ≤ canaries, found {correct} ≤ {guesses} ≤ {canaries}"
    )]
    Counts {
        canaries: u64,
        guesses: u64,
        correct: u64,
    },
    #[error("delta must be in [0, 1], found {delta}")]
    Delta { delta: f64 },
    #[error("confidence must be in (0, 1), found {confidence}")]
    Confidence { confidence: f64 },
    #[error("epsilon must be finite and non-negative, found {epsilon}")]
    Epsilon { epsilon: f64 },
}

fn check_counts(canaries: u64, guesses: u64, correct: u64) -> Result<(), BoundError> {
    if correct <= guesses && guesses <= canaries {
        Ok(())
    } else {
        Err(BoundError::Counts {
            canaries,
            guesses,
            correct,
        })
    }
}

/// ln P[Binomial(r, p) = k] for k = 0..=r, with p = e^ε / (1 + e^ε).
fn log_binomial_pmf(r: u64, epsilon: f64) -> Vec<f64> {
    // ln p = −ln(1 + e^−ε), ln(1 − p) = −ε − ln(1 + e^−ε): no cancellation for any ε ≥ 0.
    let log1p_exp_neg = (-epsilon).exp().ln_1p();
    let ln_p = -log1p_exp_neg;
    let ln_q = -epsilon - log1p_exp_neg;
    let ln_r_fact = ln_gamma(r as f64 + 1.0);
    (0..=r)
        .map(|k| {
            let k = k as f64;
            let rk = r as f64 - k;
            ln_r_fact - ln_gamma(k + 1.0) - ln_gamma(rk + 1.0) + k * ln_p + rk * ln_q
        })
        .collect()
}

/// The p-value of Theorem 5.2: an upper bound on P[W ≥ correct] for an (ε, δ)-DP mechanism
/// audited with `canaries` canaries and `guesses` non-abstaining guesses (capped at 1).
///
/// ```
/// use dpx::audit::bound::p_value;
/// // δ = 0: exactly P[Binomial(r, p_ε) ≥ v]; at ε = 0 every guess is a fair coin.
/// assert!((p_value(10, 2, 2, 0.0, 0.0).unwrap() - 0.25).abs() < 1e-12);
/// ```
pub fn p_value(
    canaries: u64,
    guesses: u64,
    correct: u64,
    epsilon: f64,
    delta: f64,
) -> Result<f64, BoundError> {
    check_counts(canaries, guesses, correct)?;
    if !(0.0..=1.0).contains(&delta) {
        return Err(BoundError::Delta { delta });
    }
    if !(epsilon.is_finite() && epsilon >= 0.0) {
        return Err(BoundError::Epsilon { epsilon });
    }
    if correct == 0 {
        return Ok(1.0);
    }
    let log_pmf = log_binomial_pmf(guesses, epsilon);
    let v = correct as usize;
    // f(v) = Σ_{k ≥ v} pmf(k), summed in log space from the smallest terms up.
    let log_tail = log_pmf[v..]
        .iter()
        .rev()
        .fold(f64::NEG_INFINITY, |acc, &l| log_add_exp(acc, l));
    let mut p = log_tail.exp();
    if delta > 0.0 {
        // α = max_i P[v − i ≤ Binomial < v] / i, the partial sums taken downwards from v − 1.
        let mut alpha = 0.0f64;
        let mut partial = f64::NEG_INFINITY;
        for i in 1..=v {
            partial = log_add_exp(partial, log_pmf[v - i]);
            alpha = alpha.max(partial.exp() / i as f64);
        }
        p += 2.0 * canaries as f64 * delta * alpha;
    }
    Ok(p.min(1.0))
}

/// ε_lower: the largest ε (to 1e-9) such that [`p_value`] at the observed counts is below
/// β = 1 − `confidence`; 0 when even ε = 0 explains the guesses.
///
/// ```
/// use dpx::audit::bound::epsilon_lower_bound;
/// // δ = 0 and 100 of 100 right: p_ε^100 = 0.05, so ε = ln(p/(1 − p)) with p = 0.05^(1/100).
/// let p = 0.05f64.powf(0.01);
/// let eps = epsilon_lower_bound(1000, 100, 100, 0.0, 0.95).unwrap();
/// assert!((eps - (p / (1.0 - p)).ln()).abs() < 1e-6);
/// ```
pub fn epsilon_lower_bound(
    canaries: u64,
    guesses: u64,
    correct: u64,
    delta: f64,
    confidence: f64,
) -> Result<f64, BoundError> {
    if !(confidence > 0.0 && confidence < 1.0) {
        return Err(BoundError::Confidence { confidence });
    }
    let beta = 1.0 - confidence;
    let rejects = |eps: f64| -> Result<bool, BoundError> {
        Ok(p_value(canaries, guesses, correct, eps, delta)? < beta)
    };
    if !rejects(0.0)? {
        return Ok(0.0);
    }
    // p_value grows with ε (p_ε grows, and the tail of a binomial grows with its success rate):
    // bracket, then bisect on the boundary.
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while rejects(hi)? {
        lo = hi;
        hi *= 2.0;
        if hi > EPSILON_SEARCH_MAX {
            return Ok(EPSILON_SEARCH_MAX);
        }
    }
    while hi - lo > 1e-9 {
        let mid = 0.5 * (lo + hi);
        if rejects(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha12Rng;

    #[test]
    fn pure_dp_p_value_is_the_binomial_tail() {
        // r = 5, ε = ln 3 (p = 3/4), v = 4: P[Bin(5, 3/4) ≥ 4] = 5·(3/4)^4·(1/4) + (3/4)^5.
        let expect = 5.0 * 0.75f64.powi(4) * 0.25 + 0.75f64.powi(5);
        let got = p_value(100, 5, 4, 3.0f64.ln(), 0.0).unwrap();
        assert!((got - expect).abs() < 1e-12, "{got} vs {expect}");
    }

    #[test]
    fn delta_term_matches_a_direct_evaluation() {
        // r = 4, ε = 0 (p = 1/2), v = 3, m = 10, δ = 0.01. pmf = [1,4,6,4,1]/16.
        // f(3) = 5/16; partial sums P[3 − i ≤ B < 3]: i=1: 6/16, i=2: 10/16 (/2 = 5/16),
        // i=3: 11/16 (/3): max is 6/16. p = 5/16 + 2·10·0.01·6/16.
        let expect = 5.0 / 16.0 + 0.2 * 6.0 / 16.0;
        let got = p_value(10, 4, 3, 0.0, 0.01).unwrap();
        assert!((got - expect).abs() < 1e-12, "{got} vs {expect}");
    }

    #[test]
    fn bound_is_monotone_and_delta_only_lowers_it() {
        let a = epsilon_lower_bound(1000, 200, 180, 0.0, 0.95).unwrap();
        let b = epsilon_lower_bound(1000, 200, 190, 0.0, 0.95).unwrap();
        let c = epsilon_lower_bound(1000, 200, 190, 1e-5, 0.95).unwrap();
        let d = epsilon_lower_bound(1000, 200, 190, 0.0, 0.99).unwrap();
        assert!(0.0 < a && a < b, "{a} {b}");
        assert!(c < b, "{c} {b}");
        assert!(d < b, "{d} {b}");
        // Half right is what a coin does: no evidence at all.
        assert_eq!(
            epsilon_lower_bound(1000, 200, 100, 1e-5, 0.95).unwrap(),
            0.0
        );
        assert_eq!(epsilon_lower_bound(1000, 0, 0, 1e-5, 0.95).unwrap(), 0.0);
    }

    #[test]
    fn the_bound_holds_for_randomized_response() {
        // An ε0-DP mechanism whose guesses are exactly randomized response (each right with
        // probability e^ε0/(1+e^ε0)) is the extreme case of Theorem 3.1: ε_lower must exceed ε0
        // in at most a 5% share of trials. 400 trials: the count of violations is
        // Binomial(400, ≤ 0.05), so more than 40 has probability < 1e-4.
        let eps0 = 1.0f64;
        let p = eps0.exp() / (1.0 + eps0.exp());
        let mut rng = ChaCha12Rng::seed_from_u64(7);
        let mut violations = 0;
        let mut largest = 0.0f64;
        for _ in 0..400 {
            let v = (0..300).filter(|_| rng.random_bool(p)).count() as u64;
            let lower = epsilon_lower_bound(300, 300, v, 0.0, 0.95).unwrap();
            largest = largest.max(lower);
            if lower > eps0 {
                violations += 1;
            }
        }
        assert!(violations <= 40, "{violations} of 400 trials exceeded ε0");
        // And the bound is not vacuous: it comes close to ε0 in the best trials.
        assert!(largest > 0.8 * eps0, "largest ε_lower {largest}");
    }

    #[test]
    fn bad_counts_and_parameters_are_refused() {
        assert!(matches!(
            p_value(10, 11, 1, 1.0, 0.0),
            Err(BoundError::Counts { .. })
        ));
        assert!(matches!(
            p_value(10, 5, 6, 1.0, 0.0),
            Err(BoundError::Counts { .. })
        ));
        assert!(matches!(
            p_value(10, 5, 2, 1.0, 1.5),
            Err(BoundError::Delta { .. })
        ));
        assert!(matches!(
            p_value(10, 5, 2, f64::NAN, 0.0),
            Err(BoundError::Epsilon { .. })
        ));
        for bad in [0.0, 1.0, f64::NAN] {
            assert!(matches!(
                epsilon_lower_bound(10, 5, 2, 0.0, bad),
                Err(BoundError::Confidence { .. })
            ));
        }
    }
}
