//! The oracle the influence-based noise schedules are checked against: the analytic influence of
//! full-batch gradient descent on the squared loss of a linear model, computed by matrix powers
//! (no eigenvalues, unlike `train::influence`), and the experiment of a config text.

use ndarray::{Array2, Axis};

use dpx::train::prepare::Experiment;

/// The experiment of a config text (written nowhere; relative paths resolve in a fresh temporary
/// directory).
pub fn build(text: &str) -> Experiment {
    let dir = tempfile::tempdir().unwrap();
    let spec = dpx::config::load_str(text, &dir.path().join("c.toml")).expect("valid config");
    Experiment::build(spec, dir.path()).expect("buildable")
}

/// q_t = tr(H (I − ηH)^{2(T−1−t)}) for t < `steps` = T, with H = X̃ᵀX̃/n, X̃ = [X, 1] the
/// experiment's training features and a column of ones, by matrix powers.
pub fn influence_by_powers(exp: &Experiment, eta: f64, steps: usize) -> Vec<f64> {
    let x = &exp.data.train.features;
    let (n, d) = x.dim();
    let mut xt = Array2::<f64>::ones((n, d + 1));
    for (mut row, src) in xt.axis_iter_mut(Axis(0)).zip(x.axis_iter(Axis(0))) {
        for j in 0..d {
            row[j] = f64::from(src[j]);
        }
    }
    let h = xt.t().dot(&xt) / n as f64;
    let a = Array2::<f64>::eye(d + 1) - &h * eta;
    let a2 = a.dot(&a);
    let mut power = Array2::<f64>::eye(d + 1);
    let mut q = vec![0.0; steps];
    for t in (0..steps).rev() {
        q[t] = h.dot(&power).diag().sum();
        power = power.dot(&a2);
    }
    q
}
