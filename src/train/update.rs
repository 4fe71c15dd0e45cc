//! The update after a release (room: `train`): the released noisy sum turned into a step of the
//! parameters, the same way in every DP-SGD run and in `dpx bench`, which times it.
//!
//! g = sum / B̄ (the expected batch size, never the realised one: dividing by the realised size
//! would leak it), plus the L2 penalty's gradient λθ (data-independent, after the noise), with
//! frozen layers' coordinates zeroed (post-processing), then the optimizer's rule; a step whose g
//! has a non-finite coordinate is refused and the parameters stay as they were.

use ndarray::{Array1, Zip};

use crate::model::Model;
use crate::optim::elementwise::all_map;
use crate::optim::{Optimizer, OptimizerState, each_param};

/// The update after a release, as a run makes it (and as `dpx bench` times it): the released sum
/// over the expected batch size (never the realised one), plus the L2 penalty's gradient λθ, with
/// frozen coordinates zeroed; then, if every coordinate is finite, the optimizer's rule at
/// learning rate `lr` (`clean_norm_sq`: AdaGrad-norm's non-private mode, [`Optimizer::step_with_norm`]).
/// Returns false, the parameters untouched, when a coordinate is not finite (the step diverged).
pub fn apply_release(
    model: &Model,
    params: &mut Array1<f32>,
    mut g: Array1<f64>,
    (expected_batch_size, lr): (f64, f64),
    optimizer: &Optimizer,
    state: &mut OptimizerState,
    clean_norm_sq: Option<f64>,
) -> bool {
    let finite = if model.spec().l2 == 0.0 && model.frozen_ranges().is_empty() {
        // Without an L2 term or frozen layers, the division and the check are one pass (the
        // same operations: each coordinate divided, then tested).
        all_after(&mut g, |x| {
            *x /= expected_batch_size;
            x.is_finite()
        })
    } else {
        each_param!(g.len(), Zip::from(&mut g), |v: &mut f64| *v /=
            expected_batch_size);
        model.add_l2_gradient(params.view(), &mut g);
        model.mask_frozen(&mut g);
        all_after(&mut g, |x| x.is_finite())
    };
    if finite {
        optimizer.step_with_norm(params, g.view(), lr, state, clean_norm_sq);
    }
    finite
}

/// `f` applied to every coordinate of `g`, and whether it held for all: over the slice in chunks
/// ([`all_map`]: on the pool from [`crate::optim::PAR_MIN_PARAMS`] coordinates, compiled for AVX-512 where the
/// CPU has it). (ndarray's own `par_iter().all(..)` took 14 ms for the 669,706 coordinates of an
/// MLP on one AMD EPYC core, more than the step; over the slice, 0.2 ms.)
fn all_after(g: &mut Array1<f64>, f: impl Fn(&mut f64) -> bool + Sync + Send + Copy) -> bool {
    match g.as_slice_mut() {
        Some(v) => all_map(v, f),
        None => g.iter_mut().fold(true, |ok, x| ok & f(x)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelSpec;

    /// The update the way it was written before the fused pass: divide, L2, mask, check, rule.
    fn reference(
        model: &Model,
        params: &mut Array1<f32>,
        mut g: Array1<f64>,
        batch: f64,
        lr: f64,
    ) -> bool {
        g.mapv_inplace(|v| v / batch);
        model.add_l2_gradient(params.view(), &mut g);
        model.mask_frozen(&mut g);
        let finite = g.iter().all(|v| v.is_finite());
        if finite {
            Optimizer::Sgd.step(params, g.view(), lr, &mut OptimizerState::default());
        }
        finite
    }

    #[test]
    fn the_update_after_a_release_is_the_reference_on_both_paths() {
        // 800 × 100 + 100 = 80,100 parameters: the parallel chunks too.
        let plain = ModelSpec::logistic_regression(800, 100).build().unwrap();
        let mut with_l2 = ModelSpec::logistic_regression(800, 100);
        with_l2.l2 = 0.01;
        let with_l2 = with_l2.build().unwrap();
        let frozen = ModelSpec::mlp(40, &[30], crate::model::spec::Activation::Tanh, 5)
            .build()
            .unwrap()
            .with_frozen(&["0".to_string()])
            .unwrap();
        for model in [&plain, &with_l2, &frozen] {
            let p = model.num_params();
            let params0 = Array1::from_shape_fn(p, |i| (i % 17) as f32 * 0.1 - 0.8);
            let sum = Array1::from_shape_fn(p, |i| (i % 29) as f64 * 3.7 - 50.0);
            let mut want = params0.clone();
            assert!(reference(model, &mut want, sum.clone(), 256.0, 0.5));
            let mut got = params0.clone();
            let mut state = OptimizerState::default();
            let ok = apply_release(
                model,
                &mut got,
                sum.clone(),
                (256.0, 0.5),
                &Optimizer::Sgd,
                &mut state,
                None,
            );
            assert!(ok);
            assert_eq!(got, want, "{p} parameters");
            // One non-finite coordinate (a trained one): refused, parameters untouched.
            let mut bad = sum.clone();
            bad[p - 1] = f64::NAN;
            let mut untouched = params0.clone();
            let ok = apply_release(
                model,
                &mut untouched,
                bad,
                (256.0, 0.5),
                &Optimizer::Sgd,
                &mut state,
                None,
            );
            assert!(!ok);
            assert_eq!(untouched, params0);
        }
    }
}
