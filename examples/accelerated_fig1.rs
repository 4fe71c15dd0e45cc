//! Figure 1 of Kuru, Birbil, Gürbüzbalaban and Yıldırım, "Differentially Private Accelerated
//! Optimization Algorithms" (arXiv:2008.01989, Sec. 3.2): DP heavy ball on the quadratic
//! F(x) = ½xᵀQx, Q = diag(μ = 0.5, L = 1) (d = 2), with noise covariance σ_T² I, σ_T² = (T c_w)².
//!
//! ```text
//! cargo run --release --example accelerated_fig1 -- results/accelerated
//! ```
//!
//! Writes into the given folder (default `results/accelerated`):
//! - `fig1_rate_vs_momentum.csv`: ρ against β ∈ {0, 0.01, …, 0.99} for α ∈ {0.1, 0.5, 1}/L:
//!   heavy ball's quadratic rate, eq. (26) as printed, and the rate Prop. 3.4's LMI certifies for
//!   every μ-strongly convex L-smooth F;
//! - `fig1_bound_vs_steps.csv` (Prop. 3.4 with the max-margin certificate at ρ + (1 − ρ)/10): for c_w ∈ {1e-4, 1e-2}, each α and β ∈ {0, 0.3, 0.7, the two
//!   rate-optimal β}, and T = 1..250: Theorem 3.5's bound at t = T with the paper's C_t = t (ρ of
//!   eq. (26) as printed, and heavy ball's ρ), with the valid C_t = ‖M^T‖/ρ^T, Prop. 3.4's bound,
//!   and the exact E[F(x_T)] − F* of the run (second-moment recursion);
//! - `fig1_summary.md`: the tables of results/accelerated/README.md.
//!
//! Initial point: E‖ξ_0 − ξ*‖² = 10 (the authors' E_0), as x_0 − x* = (√2.5, √2.5) = x_{−1} − x*.

use std::fmt::Write as _;
use std::path::PathBuf;

use dpx::optim::certificate::lmi::{Certificate, LmiProblem};
use dpx::optim::certificate::{self as cert, Polynomial, Thm35Inputs};

const MU: f64 = 0.5;
const L: f64 = 1.0;
const EIGS: [f64; 2] = [MU, L];
const ALPHAS: [f64; 3] = [0.1, 0.5, 1.0];
const CWS: [f64; 2] = [1e-4, 1e-2];
const STEPS: u32 = 250;
const TOL: f64 = 1e-6;

fn fmt_opt(v: Option<f64>) -> String {
    v.map_or_else(String::new, |x| format!("{x:.6}"))
}

fn betas(alpha: f64) -> Vec<(&'static str, f64)> {
    vec![
        ("0", 0.0),
        ("0.3", 0.3),
        ("0.7", 0.7),
        (
            "optimal_eq26",
            cert::rate_optimal_momentum(alpha, MU, Polynomial::Eq26AsPrinted).0,
        ),
        (
            "optimal_heavy_ball",
            cert::rate_optimal_momentum(alpha, MU, Polynomial::HeavyBall).0,
        ),
    ]
}

/// Prop. 3.4's LMI for step size `a` and momentum `b` on Figure 1's quadratic.
fn problem(a: f64, b: f64) -> LmiProblem {
    LmiProblem {
        alpha: a,
        beta: b,
        mu: MU,
        l: L,
    }
}

fn main() -> std::io::Result<()> {
    let out = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "results/accelerated".into()),
    );
    std::fs::create_dir_all(&out)?;
    let mut md = String::new();

    // ρ against β.
    let mut csv = String::from("alpha,beta,rho_heavy_ball,rho_eq26_as_printed,rho_lmi\n");
    let mut lmi_dominates = true;
    let mut argmins = Vec::new();
    for &a in &ALPHAS {
        let mut best = (f64::INFINITY, 0.0, f64::INFINITY, 0.0, f64::INFINITY, 0.0);
        for k in 0..100 {
            let b = k as f64 / 100.0;
            let hb = cert::quadratic_rate(a, b, MU, L, Polynomial::HeavyBall);
            let p26 = cert::quadratic_rate(a, b, MU, L, Polynomial::Eq26AsPrinted);
            let lmi = problem(a, b).certified_rate(TOL).map(|c| c.rho);
            if let Some(r) = lmi {
                lmi_dominates &= r >= hb - TOL;
                if r < best.4 {
                    (best.4, best.5) = (r, b);
                }
            }
            if hb < best.0 {
                (best.0, best.1) = (hb, b);
            }
            if p26 < best.2 {
                (best.2, best.3) = (p26, b);
            }
            writeln!(csv, "{a},{b},{hb:.8},{p26:.8},{}", fmt_opt(lmi)).unwrap();
        }
        argmins.push((a, best));
    }
    std::fs::write(out.join("fig1_rate_vs_momentum.csv"), csv)?;

    writeln!(md, "### Rates (μ = {MU}, L = {L})\n").unwrap();
    writeln!(
        md,
        "| αL | β | rule | ρ heavy ball | ρ eq. (26) as printed | ρ certified (LMI) |"
    )
    .unwrap();
    writeln!(md, "|---|---|---|---|---|---|").unwrap();
    for &a in &ALPHAS {
        for (name, b) in betas(a) {
            let hb = cert::quadratic_rate(a, b, MU, L, Polynomial::HeavyBall);
            let p26 = cert::quadratic_rate(a, b, MU, L, Polynomial::Eq26AsPrinted);
            let lmi = problem(a, b).certified_rate(TOL);
            let lmi = lmi.map_or("none < 1".into(), |c| format!("{:.4}", c.rho));
            writeln!(md, "| {a} | {b:.4} | {name} | {hb:.4} | {p26:.4} | {lmi} |").unwrap();
        }
    }
    writeln!(md, "\nGrid minima over β ∈ {{0, 0.01, …, 0.99}}:\n").unwrap();
    writeln!(
        md,
        "| αL | argmin ρ heavy ball | min | argmin ρ eq. (26) | min | argmin ρ LMI | min |"
    )
    .unwrap();
    writeln!(md, "|---|---|---|---|---|---|---|").unwrap();
    for (a, b) in &argmins {
        writeln!(
            md,
            "| {a} | {:.2} | {:.4} | {:.2} | {:.4} | {:.2} | {:.4} |",
            b.1, b.0, b.3, b.2, b.5, b.4
        )
        .unwrap();
    }
    writeln!(
        md,
        "\nLMI rate ≥ heavy ball's quadratic rate at every grid point: {lmi_dominates}"
    )
    .unwrap();

    // Bounds against T.
    let e = (2.5f64).sqrt();
    let e0 = [e, e];
    let mut csv = String::from(
        "c_w,alpha,momentum_rule,beta,steps,noise_var,rho_heavy_ball,rho_eq26_as_printed,c_t_valid,\
         bound_paper_ct_t_eq26,bound_paper_ct_t_heavy_ball,bound_valid_ct,bound_prop34,exact_excess\n",
    );
    writeln!(
        md,
        "\n### Bounds at t = T, σ_T² = (T c_w)², E‖ξ_0 − ξ*‖² = 10\n"
    )
    .unwrap();
    writeln!(
        md,
        "| c_w | αL | β | argmin_T paper bound (C_t = t, ρ (26)) | its min | argmin_T exact | exact min | paper bound ≥ exact ∀T | valid-C_t bound ≥ exact ∀T | Prop. 3.4 ≥ exact ∀T |"
    )
    .unwrap();
    writeln!(md, "|---|---|---|---|---|---|---|---|---|---|").unwrap();
    for &cw in &CWS {
        for &a in &ALPHAS {
            for (name, b) in betas(a) {
                let rho_hb = cert::quadratic_rate(a, b, MU, L, Polynomial::HeavyBall);
                let rho26 = cert::quadratic_rate(a, b, MU, L, Polynomial::Eq26AsPrinted);
                // Eq. (23) with the max-margin certificate at ρ' = ρ + (1 − ρ)/10 (a valid bound,
                // not optimised over ρ, P and c).
                let pb = problem(a, b);
                let lmi: Option<Certificate> = pb
                    .certified_rate(TOL)
                    .and_then(|c| pb.central_certificate_at(c.rho + 0.1 * (1.0 - c.rho)));
                let (mut best_paper, mut best_exact) = ((0, f64::INFINITY), (0, f64::INFINITY));
                let (mut paper_ok, mut valid_ok, mut prop_ok) = (true, true, true);
                for t in 1..=STEPS {
                    let s2 = (t as f64 * cw).powi(2);
                    let exact = cert::exact_moments(a, b, &EIGS, s2, &e0, t)[t as usize].excess;
                    let inp = |rho: f64, c_t: f64| Thm35Inputs {
                        alpha: a,
                        beta: b,
                        eigenvalues: &EIGS,
                        noise_var: s2,
                        initial_sq_distance: 10.0,
                        rho,
                        c_t,
                        t,
                    };
                    let c_t = cert::transient_constant(a, b, &EIGS, t);
                    let paper26 = cert::thm35_bound(&inp(rho26, t as f64));
                    let paper_hb = cert::thm35_bound(&inp(rho_hb, t as f64));
                    let valid = cert::thm35_bound(&inp(rho_hb, c_t));
                    let excess0 = 0.5 * (MU + L) * 2.5;
                    let prop = lmi.map(|c| {
                        c.bound(
                            c.initial_term(&e0, &e0, excess0),
                            L,
                            a,
                            2.0 * s2,
                            c.noise_factor_derived(L),
                            t,
                        )
                    });
                    paper_ok &= paper26 >= exact;
                    valid_ok &= valid >= exact;
                    prop_ok &= prop.is_none_or(|p| p >= exact);
                    if paper26 < best_paper.1 {
                        best_paper = (t, paper26);
                    }
                    if exact < best_exact.1 {
                        best_exact = (t, exact);
                    }
                    writeln!(
                        csv,
                        "{cw},{a},{name},{b:.6},{t},{s2:.6e},{rho_hb:.8},{rho26:.8},{c_t:.6},{paper26:.6e},{paper_hb:.6e},{valid:.6e},{},{exact:.6e}",
                        prop.map_or(String::new(), |p| format!("{p:.6e}"))
                    )
                    .unwrap();
                }
                writeln!(
                    md,
                    "| {cw:e} | {a} | {name} ({b:.3}) | {} | {:.3e} | {} | {:.3e} | {paper_ok} | {valid_ok} | {} |",
                    best_paper.0,
                    best_paper.1,
                    best_exact.0,
                    best_exact.1,
                    if lmi.is_some() { prop_ok.to_string() } else { "no certificate".into() }
                )
                .unwrap();
            }
        }
    }
    std::fs::write(out.join("fig1_bound_vs_steps.csv"), csv)?;
    std::fs::write(out.join("fig1_summary.md"), &md)?;
    print!("{md}");
    Ok(())
}
