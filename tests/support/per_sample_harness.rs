//! The per-sample gradient harness the layer tests share: a batch-of-1 loop of the non-private
//! gradient (Opacus's `compute_microbatch_grad_sample` idea), central finite differences of the
//! loss, norms, group norms and weighted sums against the materialised `[B, P]` matrix, both
//! convolution norm methods, data-parallel shards, and bit-identical results on 1, 2 and 3
//! threads.

// Each test file includes this module and uses some of it.
#![allow(dead_code)]

use dpx::grad::PerSampleGradients;
use dpx::model::{ConvNormMethod, LayerSpec, LossKind, Model, ModelSpec, with_threads};
use ndarray::{Array1, Array2, s};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

pub fn random_batch(model: &Model, batch: usize, seed: u64) -> (Array2<f32>, Vec<usize>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let x = Array2::from_shape_fn((batch, model.input_size()), |_| {
        rng.sample::<f32, _>(StandardNormal)
    });
    let labels = (0..batch)
        .map(|_| rng.random_range(0..model.num_classes()))
        .collect();
    (x, labels)
}

/// |a − b| ≤ atol + rtol·max(|a|, |b|), elementwise, with a message naming the index.
pub fn assert_close(a: &[f64], b: &[f64], rtol: f64, atol: f64, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (j, (&x, &y)) in a.iter().zip(b).enumerate() {
        let tol = atol + rtol * x.abs().max(y.abs());
        assert!((x - y).abs() <= tol, "{what}[{j}]: {x} vs {y} (tol {tol})");
    }
}

/// The full check of one model at one batch.
///
/// Tolerances: every path computes in f32 with f64 accumulation of norms; different summation
/// orders of O(10³) f32 products differ by ~√n·2⁻²⁴ relative, so 1e-4 relative plus a small
/// absolute floor is ample for the batch-vs-loop comparisons.
pub fn check_model(spec: ModelSpec, batch: usize, seed: u64) {
    check_model_with_step(spec, batch, seed, 1.0 / 64.0);
}

/// [`check_model`] with finite-difference step `h`: piecewise-linear models (ReLU, max pooling)
/// need a step small enough not to cross a kink. Run twice: with the shards the model chooses
/// (one, on batches this small) and with one data-parallel shard per example (each shard its own
/// forward and backward pass, the sums added in shard order).
pub fn check_model_with_step(spec: ModelSpec, batch: usize, seed: u64, h: f32) {
    let model = spec.build().expect("valid spec");
    check_built(&model, batch, seed, h);
    if batch > 1 {
        check_built(&model.with_shards(batch), batch, seed, h);
    }
}

pub fn check_built(model: &Model, batch: usize, seed: u64, h: f32) {
    let params = model.init_params(seed);
    let (x, labels) = random_batch(model, batch, seed + 1);
    let grads = model
        .per_sample(params.view(), x.view(), &labels)
        .expect("per_sample");
    let mat = grads.materialize().expect("small enough");
    assert_eq!(mat.dim(), (batch, model.num_params()));

    // 1. Rows of the matrix equal a batch-of-1 loop of the non-private gradient.
    for i in 0..batch {
        let (loss, g) = model
            .loss_and_gradient(params.view(), x.slice(s![i..i + 1, ..]), &labels[i..i + 1])
            .expect("single example");
        let row: Vec<f64> = mat.row(i).iter().map(|&v| v as f64).collect();
        assert_close(
            row.as_slice(),
            g.as_slice().unwrap(),
            1e-4,
            1e-6,
            "row vs batch-of-1",
        );
        assert!((loss - grads.losses()[i]).abs() <= 1e-5 * loss.abs().max(1.0));
    }

    // 2. Norms, whole and per group, equal the materialised ones.
    let norms = grads.norms();
    let group_norms = grads.group_norms();
    let groups = grads.groups();
    assert_eq!(group_norms.dim(), (batch, groups.len()));
    for i in 0..batch {
        let row = mat.row(i);
        let full = row.iter().map(|&v| (v as f64).powi(2)).sum::<f64>().sqrt();
        assert_close(&[norms[i]], &[full], 1e-5, 1e-9, "norm");
        for (k, (_, r)) in groups.iter().enumerate() {
            let gn = row
                .slice(s![r.clone()])
                .iter()
                .map(|&v| (v as f64).powi(2))
                .sum::<f64>()
                .sqrt();
            assert_close(&[group_norms[[i, k]]], &[gn], 1e-5, 1e-9, "group norm");
        }
    }

    // 3. Weighted sums equal the materialised ones.
    let mut rng = ChaCha8Rng::seed_from_u64(seed + 2);
    let w = Array1::from_shape_fn(batch, |_| rng.random_range(0.0..1.0f64));
    let ws = grads.weighted_sum(&w);
    let expect: Vec<f64> = (0..model.num_params())
        .map(|j| (0..batch).map(|i| w[i] * mat[[i, j]] as f64).sum())
        .collect();
    assert_close(ws.as_slice().unwrap(), &expect, 1e-4, 1e-6, "weighted_sum");
    let gw = Array2::from_shape_fn((batch, groups.len()), |_| rng.random_range(0.0..1.0f64));
    let gws = grads.group_weighted_sum(&gw);
    let mut expect = vec![0.0f64; model.num_params()];
    for (k, (_, r)) in groups.iter().enumerate() {
        for j in r.clone() {
            expect[j] = (0..batch).map(|i| gw[[i, k]] * mat[[i, j]] as f64).sum();
        }
    }
    assert_close(
        gws.as_slice().unwrap(),
        &expect,
        1e-4,
        1e-6,
        "group_weighted_sum",
    );

    // 4. Both convolution norm methods agree.
    let a = model
        .per_sample(params.view(), x.view(), &labels)
        .unwrap()
        .with_conv_norm_method(ConvNormMethod::Ghost);
    let b = model
        .per_sample(params.view(), x.view(), &labels)
        .unwrap()
        .with_conv_norm_method(ConvNormMethod::Materialize);
    assert_close(
        a.group_norms().as_slice().unwrap(),
        b.group_norms().as_slice().unwrap(),
        1e-4,
        1e-9,
        "ghost vs materialised conv norms",
    );
    // The ghost path keeps no per-example gradients, so its weighted sum is the product
    // (diag(w) Δ)ᵀ U: it must agree with the materialised sums too.
    let _ = a.norms();
    assert_close(
        a.weighted_sum(&w).as_slice().unwrap(),
        ws.as_slice().unwrap(),
        1e-4,
        1e-6,
        "ghost-path weighted_sum",
    );

    // 5. The summed gradient against central finite differences of the summed loss, on a few
    //    coordinates of every group. The denominator is the exact f32 difference of the perturbed
    //    parameters. f32 forward passes carry ~2e-6 relative error in the loss L, so the
    //    quotient's rounding error is ~2e-6·|L|/h; truncation is O(h²). Tolerance:
    //    2e-3·max(1, |L|) + 4e-6·max(1, |L|)/(2h) absolute plus 2% relative.
    let sum = grads.sum();
    let total_loss = |p: &Array1<f32>| -> f64 {
        let (mean, _) = model.evaluate(p.view(), x.view(), &labels).unwrap();
        mean * batch as f64
    };
    let l0 = total_loss(&params).abs().max(1.0);
    for (_, r) in &groups {
        for t in 0..3 {
            let j = r.start + (t * 7919 + seed as usize) % r.len();
            let mut plus = params.clone();
            plus[j] += h;
            let mut minus = params.clone();
            minus[j] -= h;
            let fd = (total_loss(&plus) - total_loss(&minus)) / (plus[j] as f64 - minus[j] as f64);
            let tol = 2e-3 * l0 + 4e-6 * l0 / (2.0 * h as f64) + 2e-2 * fd.abs();
            assert!(
                (fd - sum[j]).abs() <= tol,
                "finite difference at {j}: {fd} vs {} (tol {tol})",
                sum[j]
            );
        }
    }
}

pub fn image_spec(input: [usize; 3], layers: Vec<LayerSpec>, loss: LossKind) -> ModelSpec {
    ModelSpec {
        input_shape: input.to_vec(),
        layers,
        loss,
        l2: 0.0,
    }
}

/// Norms, weighted sums and logits of `spec` on a small batch are the same bits on 1, 2 and 3
/// threads.
pub fn assert_thread_independent(spec: &ModelSpec, batch: usize) {
    assert_thread_independent_with(spec, batch, None);
    assert_thread_independent_with(spec, batch, Some(3));
}

/// [`assert_thread_independent`] with a fixed number of data-parallel shards.
pub fn assert_thread_independent_with(spec: &ModelSpec, batch: usize, shards: Option<usize>) {
    let built = spec.build().unwrap();
    let model = match shards {
        Some(n) => built.with_shards(n),
        None => built,
    };
    let params = model.init_params(1);
    let (x, labels) = random_batch(&model, batch, 2);
    let w = Array1::from_shape_fn(batch, |i| 1.0 / (1.0 + i as f64));
    let run = |threads| {
        with_threads(threads, || {
            let g = model.per_sample(params.view(), x.view(), &labels).unwrap();
            (
                g.norms(),
                g.group_norms(),
                g.weighted_sum(&w),
                model.forward(params.view(), x.view()).unwrap(),
            )
        })
        .unwrap()
    };
    let one = run(1);
    assert_eq!(one, run(2), "{spec:?}");
    assert_eq!(one, run(3), "{spec:?}");
}
