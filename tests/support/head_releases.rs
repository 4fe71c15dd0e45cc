//! Releases made once before training (private standardisation statistics, private PCA): a
//! small Gaussian-mixture config to attach them to, and the check every such release must pass:
//! its events head every ledger, calibration pays for them, and the trained seed records them.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use dpx::config;
use dpx::privacy::event::DpEvent;
use dpx::train::prepare::Experiment;
use dpx::train::{SeedEnd, Silent, train_seed};

/// A 3-class Gaussian-mixture experiment (2,000 training rows of `n_features`, two seeds, two
/// epochs of Poisson batches of 100, clip norm 1) with `model` as its `[model]` body, `data_extra`
/// appended to `[data]` and `extra` (privacy, noise) at the end. Written into `dir` under a name
/// that differs with the extras' lengths.
pub fn mixture_config(
    dir: &Path,
    n_features: usize,
    model: &str,
    data_extra: &str,
    extra: &str,
) -> PathBuf {
    let text = format!(
        r#"
[experiment]
name = "head_releases"
seeds = [0, 1]

[data]
dataset = "gaussian_mixture"
{data_extra}

[data.synthetic]
n_train = 2000
n_test = 400
n_features = {n_features}
n_classes = 3
separation = 4.0
seed = 3

[model]
{model}

[train]
epochs = 2
expected_batch_size = 100
learning_rate = 0.5
eval_every_steps = 10

[clip]
clip_norm = 1.0

{extra}
"#
    );
    let path = dir.join(format!("cfg{}.toml", data_extra.len() * 1000 + extra.len()));
    std::fs::write(&path, text).unwrap();
    path
}

/// The experiment of a config file written by [`mixture_config`].
pub fn build(dir: &Path, config_path: &Path) -> Experiment {
    Experiment::build(config::load(config_path).unwrap(), dir).unwrap()
}

/// `exp` calibrated to `target_epsilon` with the releases `head` and `plain` the same run without
/// them: `head` is exactly the initial ledger and the start of the planned one; calibration pays
/// for it with a larger noise multiplier; seed 0 trains to the target ε, records the planned
/// ledger, and its row of step 0 already carries the releases' ε.
pub fn assert_head_releases_are_calibrated(
    exp: &Experiment,
    plain: &Experiment,
    head: &[(DpEvent, u64)],
    target_epsilon: f64,
) {
    let initial = exp.plan.initial_ledger();
    assert_eq!(initial.runs(), head);
    assert!(plain.plan.initial_ledger().runs().is_empty());
    assert!(exp.plan.privacy.as_ref().unwrap().epsilon_guaranteed);

    let sigma = exp.plan.privacy.as_ref().unwrap().noise_multiplier;
    let sigma_plain = plain.plan.privacy.as_ref().unwrap().noise_multiplier;
    assert!(sigma > sigma_plain, "{sigma} <= {sigma_plain}");
    let head_eps = exp.plan.epsilon_of(&initial).unwrap().unwrap().epsilon;
    assert!(head_eps > 0.0 && head_eps < target_epsilon, "{head_eps}");

    let planned = exp.plan.planned_ledger(exp.plan.steps);
    assert_eq!(&planned.runs()[..head.len()], head);
    match train_seed(exp, 0, &Silent, &AtomicBool::new(false)).unwrap() {
        SeedEnd::Finished(res) => {
            assert_eq!(res.ledger, planned);
            let eps = res.rows.last().unwrap().epsilon.unwrap();
            assert!(
                eps <= target_epsilon && eps > target_epsilon - 0.01,
                "{eps}"
            );
            assert_eq!(res.rows[0].step, 0);
            assert_eq!(res.rows[0].epsilon, Some(head_eps));
        }
        SeedEnd::Interrupted => panic!("not interrupted"),
    }
}

/// ε of the whole planned run (for comparisons at a fixed noise multiplier).
pub fn planned_epsilon(e: &Experiment) -> f64 {
    e.plan
        .epsilon_of(&e.plan.planned_ledger(e.plan.steps))
        .unwrap()
        .unwrap()
        .epsilon
}
