//! Augmented views of image batches (room: `data`): random crops of a mirror-padded image and
//! horizontal flips, K views per example, for augmentation multiplicity (De et al. 2022,
//! "Unlocking high-accuracy differentially private image classification through scale",
//! arXiv:2204.13650, Sec. 3.1; the views of Hoffer et al. 2019 and Fort et al. 2021).
//!
//! A view of a `[C, H, W]` image (flattened channel-major, as [`super::Dataset`] stores images)
//! is drawn as in De et al.'s pipeline: pad each side by `p` pixels by mirroring the edge rows and
//! columns (symmetric padding: the padded row above row 0 is row 0, then row 1, ...), cut an
//! `H × W` window at a uniformly random offset in `0..=2p` along each axis, then flip it left to
//! right with probability 1/2. The view of one example depends only on that example and the
//! draws, so averaging an example's views' gradients keeps its sensitivity.
//!
//! Randomness: every draw of a batch (two offsets and a flip per view, in view order) is taken
//! from the caller's generator before any pixel is copied, so the views are the same whatever
//! the thread count.

use ndarray::{Array2, ArrayView2, Axis};
use rand::Rng;
use rayon::prelude::*;

/// How views are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ViewSpec {
    /// Views K per example.
    pub views: usize,
    /// Mirror padding p before the random crop (0: no crop).
    pub crop_padding: usize,
    /// Flip each view left to right with probability 1/2.
    pub horizontal_flip: bool,
}

/// One view's draws: crop offsets in `0..=2p` and whether it is flipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Draw {
    dy: usize,
    dx: usize,
    flip: bool,
}

/// The index into `0..n` of padded coordinate `i` (`0..n + 2p`) under symmetric mirroring.
fn mirrored(i: usize, p: usize, n: usize) -> usize {
    if i < p {
        p - 1 - i
    } else if i - p >= n {
        2 * n - 1 - (i - p)
    } else {
        i - p
    }
}

/// K views of every row of `x` (`[B, C·H·W]`, images of `shape` = `[C, H, W]`): `[B·K, C·H·W]`,
/// example i's views in rows i·K .. i·K + K. `shape` must be an image with `p ≤ H` and `p ≤ W`
/// (the config check says so before a run starts).
pub fn views(
    x: ArrayView2<'_, f32>,
    shape: [usize; 3],
    spec: ViewSpec,
    rng: &mut impl Rng,
) -> Array2<f32> {
    let [c, h, w] = shape;
    let p = spec.crop_padding;
    assert_eq!(x.ncols(), c * h * w, "rows are [C, H, W] images");
    assert!(p <= h && p <= w, "padding {p} over an image of {h} x {w}");
    let k = spec.views;
    let draws: Vec<Draw> = (0..x.nrows() * k)
        .map(|_| Draw {
            dy: if p > 0 {
                rng.random_range(0..=2 * p)
            } else {
                0
            },
            dx: if p > 0 {
                rng.random_range(0..=2 * p)
            } else {
                0
            },
            flip: spec.horizontal_flip && rng.random::<bool>(),
        })
        .collect();
    let mut out = Array2::<f32>::zeros((x.nrows() * k, c * h * w));
    out.axis_iter_mut(Axis(0))
        .into_par_iter()
        .zip(draws.par_iter())
        .enumerate()
        .for_each(|(r, (mut row, d))| {
            let src = x.row(r / k);
            for ch in 0..c {
                for y in 0..h {
                    let sy = mirrored(y + d.dy, p, h);
                    for xo in 0..w {
                        let xc = if d.flip { w - 1 - xo } else { xo };
                        let sx = mirrored(xc + d.dx, p, w);
                        row[(ch * h + y) * w + xo] = src[(ch * h + sy) * w + sx];
                    }
                }
            }
        });
    out
}

/// Every image of `x` (rows are `[C, H, W]` images of `shape`) mirrored left to right: what the
/// precomputed features of [`flip_views`] are computed from.
pub fn mirror_images(x: ArrayView2<'_, f32>, shape: [usize; 3]) -> Array2<f32> {
    let [c, h, w] = shape;
    assert_eq!(x.ncols(), c * h * w, "rows are [C, H, W] images");
    let mut out = Array2::<f32>::zeros(x.raw_dim());
    out.axis_iter_mut(Axis(0))
        .into_par_iter()
        .zip(x.axis_iter(Axis(0)).into_par_iter())
        .for_each(|(mut row, src)| {
            for line in 0..c * h {
                for xo in 0..w {
                    row[line * w + xo] = src[line * w + w - 1 - xo];
                }
            }
        });
    out
}

/// K views of each example `indices[i]` when the augmentation is a feature map's input flipped
/// left to right with probability 1/2 and both features are precomputed: each view is the row of
/// `plain` (the features of the image) or of `mirrored` (the features of its mirror image),
/// `[B·K, F]` with example i's views in rows i·K .. i·K + K. The draws are those of [`views`]
/// without a crop (one fair coin per view, in view order, all taken before any row is copied),
/// so on pixels (`mirrored` = [`mirror_images`] of `plain`) the two give the same views.
pub fn flip_views(
    plain: ArrayView2<'_, f32>,
    mirrored: ArrayView2<'_, f32>,
    indices: &[usize],
    views: usize,
    rng: &mut impl Rng,
) -> Array2<f32> {
    assert_eq!(plain.dim(), mirrored.dim(), "one mirrored row per example");
    let flips: Vec<bool> = (0..indices.len() * views)
        .map(|_| rng.random::<bool>())
        .collect();
    let mut out = Array2::<f32>::zeros((indices.len() * views, plain.ncols()));
    out.axis_iter_mut(Axis(0))
        .into_par_iter()
        .zip(flips.par_iter())
        .enumerate()
        .for_each(|(r, (mut row, &flip))| {
            let source = if flip { &mirrored } else { &plain };
            row.assign(&source.row(indices[r / views]));
        });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;
    use rand::SeedableRng;
    use rand_chacha::ChaCha12Rng;

    fn image(c: usize, h: usize, w: usize) -> Array2<f32> {
        Array2::from_shape_fn((1, c * h * w), |(_, j)| j as f32)
    }

    #[test]
    fn mirror_padding_is_symmetric() {
        // n = 4, p = 2: padded coordinates 0..8 read rows 1 0 | 0 1 2 3 | 3 2.
        let got: Vec<usize> = (0..8).map(|i| mirrored(i, 2, 4)).collect();
        assert_eq!(got, vec![1, 0, 0, 1, 2, 3, 3, 2]);
    }

    #[test]
    fn without_crop_or_flip_every_view_is_the_image() {
        let x = image(3, 4, 5);
        let spec = ViewSpec {
            views: 3,
            crop_padding: 0,
            horizontal_flip: false,
        };
        let v = views(
            x.view(),
            [3, 4, 5],
            spec,
            &mut ChaCha12Rng::seed_from_u64(1),
        );
        assert_eq!(v.nrows(), 3);
        for r in v.rows() {
            assert_eq!(r, x.row(0));
        }
    }

    #[test]
    fn a_view_is_a_shifted_window_of_the_padded_image_maybe_flipped() {
        let (c, h, w, p) = (2, 5, 6, 2);
        let x = image(c, h, w);
        let spec = ViewSpec {
            views: 64,
            crop_padding: p,
            horizontal_flip: true,
        };
        let v = views(
            x.view(),
            [c, h, w],
            spec,
            &mut ChaCha12Rng::seed_from_u64(7),
        );
        let (mut flipped, mut shifted) = (0, 0);
        for r in v.rows() {
            // Find the draw that explains the view: some (dy, dx, flip) must reproduce it.
            let mut found = None;
            for dy in 0..=2 * p {
                for dx in 0..=2 * p {
                    for flip in [false, true] {
                        let ok = (0..c * h * w).all(|j| {
                            let (ch, y, xo) = (j / (h * w), (j / w) % h, j % w);
                            let xc = if flip { w - 1 - xo } else { xo };
                            let src =
                                (ch * h + mirrored(y + dy, p, h)) * w + mirrored(xc + dx, p, w);
                            r[j] == x[[0, src]]
                        });
                        if ok && found.is_none() {
                            found = Some((dy, dx, flip));
                        }
                    }
                }
            }
            let (dy, dx, flip) = found.expect("every view is a crop of the padded image");
            flipped += usize::from(flip);
            shifted += usize::from(dy != p || dx != p);
        }
        // 64 views: both flips and shifts occur (a failure here has probability < 2^-60).
        assert!(flipped > 0 && flipped < 64, "{flipped} of 64 flipped");
        assert!(shifted > 0, "no view was shifted");
    }

    #[test]
    fn views_do_not_depend_on_the_thread_count() {
        let x = Array2::from_shape_fn((9, 3 * 8 * 8), |(i, j)| (i * 1000 + j) as f32);
        let spec = ViewSpec {
            views: 4,
            crop_padding: 4,
            horizontal_flip: true,
        };
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                views(
                    x.view(),
                    [3, 8, 8],
                    spec,
                    &mut ChaCha12Rng::seed_from_u64(3),
                )
            })
        };
        assert_eq!(run(1), run(3));
    }

    #[test]
    fn flip_views_of_mirrored_pixels_are_the_views_without_crop() {
        let shape = [3, 4, 6];
        let x = Array2::from_shape_fn((7, 72), |(i, j)| (i * 100 + j) as f32);
        let m = mirror_images(x.view(), shape);
        // Mirroring twice is the identity; a mirrored row reads its line backwards.
        assert_eq!(mirror_images(m.view(), shape), x);
        assert_eq!(m[[2, 0]], x[[2, 5]]);
        assert_eq!(m[[2, 6 + 1]], x[[2, 6 + 4]]);
        let indices = [4, 0, 4, 6];
        let spec = ViewSpec {
            views: 5,
            crop_padding: 0,
            horizontal_flip: true,
        };
        let selected = x.select(Axis(0), &indices);
        let want = views(
            selected.view(),
            shape,
            spec,
            &mut ChaCha12Rng::seed_from_u64(11),
        );
        let mut rng = ChaCha12Rng::seed_from_u64(11);
        let got = flip_views(x.view(), m.view(), &indices, 5, &mut rng);
        assert_eq!(got, want);
        // Both sources occur among the 20 views (a failure has probability 2^-19).
        let mirrored = (0..20)
            .filter(|&r| got.row(r) == m.row(indices[r / 5]))
            .count();
        assert!(mirrored > 0 && mirrored < 20, "{mirrored} of 20 mirrored");
        // The generator moved by exactly one draw per view.
        let mut reference = ChaCha12Rng::seed_from_u64(11);
        for _ in 0..20 {
            let _: bool = reference.random();
        }
        assert_eq!(rng.get_word_pos(), reference.get_word_pos());
    }
}
