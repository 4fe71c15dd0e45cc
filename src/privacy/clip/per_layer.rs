//! Per-layer clipping: a budget of clip norms across parameter groups (McMahan et al. 2018,
//! "A general approach to adding differential privacy to iterative training procedures", §3;
//! the per-layer baseline of Abadi et al. 2016 that AdaCliP compares against, docs/methods/adaclip.md §2).
//!
//! Part of the privacy room. Group k (a layer's weights, its bias, ...) of example i is scaled to
//! norm at most C_k: w_ik = min(1, C_k/‖g_ik‖). With Σ_k C_k² = C², one example's clipped
//! gradient has norm² = Σ_k ‖w_ik g_ik‖² ≤ Σ_k C_k² = C², so the L2 sensitivity of the sum is C and
//! the noise is N(0, (σ·C)² I) on every coordinate: the event is `Gaussian(σ)` exactly as for
//! flat clipping. (AdaCliP's baseline clips each of L layers at 4 with noise of multiplier z per
//! layer, i.e. z_eff = z/√L: the same as `equal` here with C = 4√L and σ = z_eff.)

use ndarray::Array2;

use super::{ClipError, LayerSplit, StepRelease};
use crate::grad::PerSampleGradients;
use crate::privacy::mechanism::GaussianSource;

/// The group clip norms C_k for groups of `sizes` parameters: `equal` C/√K, `by_size` C·√(P_k/P).
/// Σ_k C_k² = C² in both cases.
pub fn group_clip_norms(clip_norm: f64, split: LayerSplit, sizes: &[usize]) -> Vec<f64> {
    let k = sizes.len().max(1) as f64;
    let total: usize = sizes.iter().sum();
    sizes
        .iter()
        .map(|&p| match split {
            LayerSplit::Equal => clip_norm / k.sqrt(),
            LayerSplit::BySize => clip_norm * (p as f64 / total.max(1) as f64).sqrt(),
        })
        .collect()
}

/// Weights w_ik = min(1, C_k/‖g_ik‖) and the number of examples with at least one clipped group.
pub fn per_layer_weights(
    group_norms: &Array2<f64>,
    group_clip: &[f64],
) -> Result<(Array2<f64>, usize), ClipError> {
    let mut weights = Array2::<f64>::ones(group_norms.dim());
    let mut clipped = 0;
    for (i, row) in group_norms.rows().into_iter().enumerate() {
        let mut any = false;
        for (k, &norm) in row.iter().enumerate() {
            if !norm.is_finite() {
                return Err(ClipError::NonFiniteNorm { index: i, norm });
            }
            if norm > group_clip[k] {
                weights[[i, k]] = group_clip[k] / norm;
                any = true;
            }
        }
        clipped += usize::from(any);
    }
    Ok((weights, clipped))
}

/// One step of per-layer clipping: Σ_i Σ_k w_ik g_ik + N(0, (σ·C)² I), event `Gaussian(σ)`.
pub fn step_per_layer<R: GaussianSource + ?Sized>(
    grads: &dyn PerSampleGradients,
    clip_norm: f64,
    split: LayerSplit,
    noise_multiplier: f64,
    rng: &mut R,
) -> Result<StepRelease, ClipError> {
    if !(clip_norm.is_finite() && clip_norm > 0.0) {
        return Err(ClipError::InvalidClipNorm { clip_norm });
    }
    let sizes: Vec<usize> = grads.groups().iter().map(|(_, r)| r.len()).collect();
    let group_clip = group_clip_norms(clip_norm, split, &sizes);
    let (weights, clipped) = per_layer_weights(&grads.group_norms(), &group_clip)?;
    let sum = grads.group_weighted_sum(&weights);
    StepRelease::gaussian_sum(
        sum,
        noise_multiplier,
        clip_norm,
        clipped,
        grads.batch_size(),
        rng,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::privacy::clip::explicit::ExplicitGradients;
    use crate::privacy::event::DpEvent;
    use ndarray::{Array2, array};

    fn norm(v: &ndarray::Array1<f64>) -> f64 {
        v.iter().map(|x| x * x).sum::<f64>().sqrt()
    }

    #[test]
    fn budgets_square_sum_to_c() {
        for split in [LayerSplit::Equal, LayerSplit::BySize] {
            let c = group_clip_norms(3.0, split, &[10, 1, 5, 100]);
            let sq: f64 = c.iter().map(|x| x * x).sum();
            assert!((sq - 9.0).abs() < 1e-12, "{split:?}: {sq}");
        }
        assert_eq!(
            group_clip_norms(2.0, LayerSplit::Equal, &[3, 5]),
            vec![2.0 / 2f64.sqrt(); 2]
        );
        let by = group_clip_norms(2.0, LayerSplit::BySize, &[1, 3]);
        assert!((by[0] - 1.0).abs() < 1e-12 && (by[1] - 3f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn a_worst_case_example_moves_the_sum_by_at_most_c() {
        // Σ_k C_k² = C²: one example, however large, contributes at most C in L2.
        let groups = vec![("w".to_string(), 0..3), ("b".to_string(), 3..4)];
        let base = array![[0.1f32, -0.2, 0.3, 0.5], [3.0, 4.0, 0.0, -9.0]];
        let c = 1.5;
        for split in [LayerSplit::Equal, LayerSplit::BySize] {
            for outlier in [
                [1e6f32, -1e6, 1e6, 1e6],
                [0.0, 0.0, 0.0, 1e9],
                [0.3, 0.1, 0.0, 0.0],
            ] {
                let mut with = base.clone();
                with.push_row(ndarray::ArrayView1::from(&outlier)).unwrap();
                let run = |m: Array2<f32>| {
                    let g = ExplicitGradients::with_groups(m, groups.clone());
                    let mut rng = rand_chacha::ChaCha12Rng::seed_from_u64(0);
                    step_per_layer(&g, c, split, 0.0, &mut rng).unwrap()
                };
                let moved = norm(&(&run(with).release.sum - &run(base.clone()).release.sum));
                assert!(moved <= c * (1.0 + 1e-12), "{split:?} {outlier:?}: {moved}");
            }
        }
    }

    #[test]
    fn clips_each_group_to_its_own_norm() {
        // Equal split of C = √2 over 2 groups: C_k = 1. Row (3, 4 | 0.5): group 0 norm 5 -> 1/5,
        // group 1 norm 0.5 untouched.
        let g = ExplicitGradients::with_groups(
            array![[3.0f32, 4.0, 0.5]],
            vec![("a".into(), 0..2), ("b".into(), 2..3)],
        );
        let mut rng = rand_chacha::ChaCha12Rng::seed_from_u64(0);
        let s = step_per_layer(&g, 2f64.sqrt(), LayerSplit::Equal, 0.0, &mut rng).unwrap();
        let expected = array![0.6, 0.8, 0.5];
        assert!(norm(&(&s.release.sum - &expected)) < 1e-7);
        assert_eq!(s.clipped_count_nonprivate, 1);
        assert_eq!(s.release.events, vec![DpEvent::gaussian(0.0)]);
    }

    use rand::SeedableRng;
}
