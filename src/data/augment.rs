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
}
