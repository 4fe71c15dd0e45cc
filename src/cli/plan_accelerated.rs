//! `dpx account --config FILE` for an `[accelerated]` experiment: the planned per-step budgets
//! ε_t, Laplace scales b_t, step sizes, momenta and stages, the steps run (T' when selected), and
//! ε from the plan's events under the pure accountant, with the RDP accountant's ε beside it;
//! for heavy ball and GD, the convergence rates certified for the run's (α, β, μ, L)
//! ([`crate::optim::certificate`]).
//!
//! Orchestration and printing only; the events are
//! [`crate::train::accelerated::AcceleratedPlan::planned_ledger`], which a test checks equal the
//! events a real run records.

use std::path::Path;
use std::process::ExitCode;

use serde::Serialize;

use crate::optim::accelerated::AcceleratedMethod;
use crate::optim::certificate::{self, Polynomial, lmi::LmiProblem};
use crate::train::accelerated::{AcceleratedExperiment, AcceleratedPlan};
use crate::train::prepare::Experiment;

#[derive(Serialize)]
struct StepRow {
    step: u64,
    stage: u32,
    step_size: f64,
    momentum: f64,
    step_epsilon: f64,
    /// ε0_t = 1/scale_t: the Laplace mechanism's ε on the batch before amplification.
    batch_epsilon: f64,
    laplace_scale: f64,
    /// Pure ε after this step, from the plan's events.
    epsilon: f64,
}

#[derive(Serialize)]
struct AcceleratedReport {
    config: String,
    method: String,
    smoothness: f64,
    strong_convexity: f64,
    l1_sensitivity: f64,
    dataset_size: u64,
    batch_size: u64,
    planned_steps: u64,
    steps: u64,
    target_epsilon: f64,
    /// Pure ε of the whole plan (basic composition, SWOR amplification).
    epsilon: f64,
    /// ε at `rdp_delta` under the RDP accountant, when it can analyse the events.
    epsilon_rdp: Option<f64>,
    rdp_delta: f64,
    rdp_note: Option<String>,
    optimum_objective: f64,
    epsilon_guaranteed: bool,
    warnings: Vec<String>,
    steps_table: Vec<StepRow>,
    /// Heavy ball's (and GD's) rates for the run's α, β and the problem's μ, L (absent for the
    /// other methods).
    #[serde(skip_serializing_if = "Option::is_none")]
    rate_certificate: Option<RateCertificateReport>,
    /// The T' score a_{τ,0}E_0 + d(S1/(nε))²(Σ_t a_{τ,t}^{1/3})³ for τ = 1..T (empty without
    /// `accelerated.select_steps`).
    step_scores: Vec<f64>,
}

/// Rates of heavy ball x_{t+1} = x_t − α g(x_t) + β(x_t − x_{t−1}) (Kuru et al., arXiv:2008.01989,
/// Sec. 3) at the run's constant α, β, for the class of μ-strongly convex, L-smooth F with the
/// plan's μ (`model.l2`) and L (`accelerated.smoothness`).
#[derive(Serialize)]
struct RateCertificateReport {
    step_size: f64,
    momentum: f64,
    strong_convexity: f64,
    smoothness: f64,
    /// The smallest ρ that Prop. 3.4's LMI certifies (to 1e-6), valid for every F of the class:
    /// E[F(x_t) − F*] ≤ ρ^{2t} V(ξ_0)/c + noise terms. Null: no ρ < 1 is certified.
    certified_rate: Option<f64>,
    /// ρ^{2T} at the steps run: the factor on the initial term after the run.
    certified_contraction: Option<f64>,
    /// max over λ ∈ {μ, L} of the spectral radius of [[1 + β − αλ, −β], [1, 0]]: the exact rate on
    /// the worst quadratic of the class (a lower bound on any certified rate).
    quadratic_rate: f64,
    /// ρ of eq. (26) as printed (Nesterov's polynomial; for comparison).
    quadratic_rate_eq26_as_printed: f64,
    /// The β minimising the quadratic rate at this α, (1 − √(αμ))², and that rate, 1 − √(αμ)
    /// (for α ≤ 1/L; null otherwise).
    rate_optimal_momentum: Option<f64>,
    rate_optimal_rate: Option<f64>,
}

fn rate_certificate(p: &AcceleratedPlan) -> Option<RateCertificateReport> {
    if !matches!(
        p.method,
        AcceleratedMethod::Gd | AcceleratedMethod::HeavyBall | AcceleratedMethod::HeavyBallEma
    ) {
        return None;
    }
    let sp = p.schedule.first()?;
    let (alpha, beta) = (sp.alpha, sp.beta);
    let (mu, l) = (p.constants.strong_convexity, p.constants.smoothness);
    let cert = LmiProblem { alpha, beta, mu, l }.certified_rate(1e-6);
    let optimal = (alpha * l <= 1.0)
        .then(|| certificate::rate_optimal_momentum(alpha, mu, Polynomial::HeavyBall));
    Some(RateCertificateReport {
        step_size: alpha,
        momentum: beta,
        strong_convexity: mu,
        smoothness: l,
        certified_rate: cert.map(|c| c.rho),
        certified_contraction: cert.map(|c| c.rho.powf(2.0 * p.steps as f64)),
        quadratic_rate: certificate::quadratic_rate(alpha, beta, mu, l, Polynomial::HeavyBall),
        quadratic_rate_eq26_as_printed: certificate::quadratic_rate(
            alpha,
            beta,
            mu,
            l,
            Polynomial::Eq26AsPrinted,
        ),
        rate_optimal_momentum: optimal.map(|o| o.0),
        rate_optimal_rate: optimal.map(|o| o.1),
    })
}

/// Print the plan of `acc` (text, or JSON with every step).
pub fn run(
    config: &Path,
    exp: &Experiment,
    acc: &AcceleratedExperiment,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let p = &acc.plan;
    let mut ledger = crate::privacy::event::EventLedger::new();
    let mut rows = Vec::with_capacity(p.steps as usize);
    // Cumulative pure ε: basic composition, so a running sum of the per-step ε of each event.
    for (t, s) in p.scales.iter().enumerate() {
        ledger.record(p.event_for(*s));
        let sp = p.schedule[t];
        rows.push(StepRow {
            step: t as u64 + 1,
            stage: sp.stage,
            step_size: sp.alpha,
            momentum: sp.beta,
            step_epsilon: p.step_epsilons[t],
            batch_epsilon: 1.0 / p.scales[t],
            laplace_scale: p.laplace_scale_at(t),
            epsilon: f64::NAN,
        });
    }
    let epsilon = p.epsilon_of(&p.planned_ledger(p.steps))?;
    // Per-row ε only where printed (each is a fresh accounting of the prefix).
    let shown: Vec<usize> = if json {
        (0..rows.len()).collect()
    } else {
        let k = (rows.len() / 10).max(1);
        let mut v: Vec<usize> = (0..rows.len()).step_by(k).collect();
        if rows.last().is_some() && v.last() != Some(&(rows.len() - 1)) {
            v.push(rows.len() - 1);
        }
        v
    };
    for &i in &shown {
        rows[i].epsilon = p.epsilon_of(&p.planned_ledger(i as u64 + 1))?;
    }
    let (epsilon_rdp, rdp_note) = match p.rdp_epsilon_of(&ledger) {
        Ok(e) => (Some(e), None),
        Err(e) => (None, Some(e.to_string())),
    };
    let report = AcceleratedReport {
        config: config.display().to_string(),
        method: format!("{:?}", p.method),
        smoothness: p.constants.smoothness,
        strong_convexity: p.constants.strong_convexity,
        l1_sensitivity: p.l1_sensitivity,
        dataset_size: p.dataset_size,
        batch_size: p.batch_size,
        planned_steps: p.planned_steps,
        steps: p.steps,
        target_epsilon: p.epsilon,
        epsilon,
        epsilon_rdp,
        rdp_delta: p.rdp_delta,
        rdp_note,
        optimum_objective: acc.optimum_objective,
        epsilon_guaranteed: p.epsilon_guaranteed,
        warnings: p.warnings.clone(),
        step_scores: p.log_scores.iter().map(|l| l.exp()).collect(),
        rate_certificate: rate_certificate(p),
        steps_table: if json {
            rows
        } else {
            shown
                .iter()
                .map(|&i| std::mem::replace(&mut rows[i], empty()))
                .collect()
        },
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("experiment {} ({})", exp.spec.name, report.config);
    println!(
        "accelerated {}: L {:.6}, mu {}, S1 {}, dataset_size {}, batch_size {}, steps {} (planned {})",
        report.method,
        report.smoothness,
        report.strong_convexity,
        report.l1_sensitivity,
        report.dataset_size,
        report.batch_size,
        report.steps,
        report.planned_steps
    );
    println!(
        "accountant pure (Laplace, SWOR amplification, basic composition): epsilon {:.6} (target {}, delta 0)",
        report.epsilon, report.target_epsilon
    );
    match (report.epsilon_rdp, &report.rdp_note) {
        (Some(e), _) => println!(
            "accountant rdp (same events): epsilon {e:.6} at delta {}",
            report.rdp_delta
        ),
        (None, Some(why)) => println!("accountant rdp: not available ({why})"),
        (None, None) => {}
    }
    if let (Some(first), Some(chosen), Some(last)) = (
        report.step_scores.first(),
        report
            .step_scores
            .get(report.steps.saturating_sub(1) as usize),
        report.step_scores.last(),
    ) {
        println!(
            "steps chosen by the error bound: T' = {} (score {first:.6e} at 1, {chosen:.6e} at T', {last:.6e} at T = {}; --json lists every score)",
            report.steps, report.planned_steps
        );
    }
    if let Some(r) = &report.rate_certificate {
        println!(
            "rates of heavy ball (Kuru et al. 2020, Sec. 3) at alpha {:.6}, beta {:.6}, mu {}, L {:.6}:",
            r.step_size, r.momentum, r.strong_convexity, r.smoothness
        );
        match (r.certified_rate, r.certified_contraction) {
            (Some(rho), Some(c)) => println!(
                "  certified rate {rho:.6} for every mu-strongly convex L-smooth F (Prop. 3.4 LMI; rho^(2T) = {c:.3e} at T = {})",
                report.steps
            ),
            _ => println!(
                "  certified rate: none below 1 (Prop. 3.4's LMI certifies no rho < 1 for these alpha, beta)"
            ),
        }
        println!(
            "  quadratic rate {:.6} (worst quadratic of the class; eq. (26) as printed: {:.6})",
            r.quadratic_rate, r.quadratic_rate_eq26_as_printed
        );
        if let (Some(b), Some(rho)) = (r.rate_optimal_momentum, r.rate_optimal_rate) {
            println!(
                "  rate-optimal momentum at this alpha: beta {b:.6} (quadratic rate {rho:.6})"
            );
        }
    }
    println!(
        "{:>6} {:>5} {:>10} {:>8} {:>12} {:>13} {:>13} {:>10}",
        "step",
        "stage",
        "step_size",
        "momentum",
        "step_epsilon",
        "batch_epsilon",
        "laplace_scale",
        "epsilon"
    );
    for r in &report.steps_table {
        println!(
            "{:>6} {:>5} {:>10.6} {:>8.6} {:>12.6e} {:>13.6e} {:>13.6} {:>10.6}",
            r.step,
            r.stage,
            r.step_size,
            r.momentum,
            r.step_epsilon,
            r.batch_epsilon,
            r.laplace_scale,
            r.epsilon
        );
    }
    if !report.epsilon_guaranteed {
        println!("epsilon is NOT guaranteed:");
    }
    for w in &report.warnings {
        println!("  warning: {w}");
    }
    Ok(ExitCode::SUCCESS)
}

fn empty() -> StepRow {
    StepRow {
        step: 0,
        stage: 0,
        step_size: 0.0,
        momentum: 0.0,
        step_epsilon: 0.0,
        batch_epsilon: 0.0,
        laplace_scale: 0.0,
        epsilon: 0.0,
    }
}
