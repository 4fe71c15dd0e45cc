//! Max and average pooling over square windows, without padding (room: `model`).
//!
//! Parameter-free: the backward pass routes the output gradient to the window's winner (max,
//! whose indices the forward pass saves) or spreads it evenly (average). Kernels in
//! [`crate::model::kernels`].

use ndarray::{Array2, ArrayView1, ArrayView2};

use super::{Backward, BackwardContext, Forward, Layer, Shape, image_input, window};
use crate::model::kernels::{self, Window};

/// The window of a pooling layer (no padding) on an image input.
fn pool_window(kernel: usize, stride: usize, input: Shape) -> Result<Window, String> {
    let (c, h, w) = image_input(input)?;
    window(c, h, w, kernel, stride, 0)
}

fn pooled(window: &Window) -> Shape {
    Shape::Image {
        c: window.channels,
        h: window.out_height,
        w: window.out_width,
    }
}

/// Max pooling.
#[derive(Debug, Clone, PartialEq)]
pub struct MaxPool {
    window: Window,
}

impl MaxPool {
    /// Max pooling with a square `kernel` moved by `stride` on an image input.
    pub fn build(kernel: usize, stride: usize, input: Shape) -> Result<Self, String> {
        Ok(MaxPool {
            window: pool_window(kernel, stride, input)?,
        })
    }
}

impl Layer for MaxPool {
    fn output_shape(&self) -> Shape {
        pooled(&self.window)
    }

    fn forward(
        &self,
        _params: ArrayView1<'_, f32>,
        input: ArrayView2<'_, f32>,
        keep: bool,
    ) -> Forward {
        let (output, argmax) = kernels::max_pool(input, &self.window);
        Forward {
            output,
            saved: keep.then(|| Box::new(argmax) as super::Saved),
        }
    }

    fn backward(
        &self,
        ctx: BackwardContext<'_>,
        d: Array2<f32>,
        _input_gradient: bool,
    ) -> Backward {
        let Some(arg) = ctx.saved.and_then(|s| s.downcast_ref::<Array2<u32>>()) else {
            unreachable!("a kept trace holds max-pool indices")
        };
        Backward {
            input_gradient: Some(kernels::max_pool_backward(d.view(), arg, &self.window)),
            delta: None,
        }
    }
}

/// Average pooling.
#[derive(Debug, Clone, PartialEq)]
pub struct AvgPool {
    window: Window,
}

impl AvgPool {
    /// Average pooling with a square `kernel` moved by `stride` on an image input.
    pub fn build(kernel: usize, stride: usize, input: Shape) -> Result<Self, String> {
        Ok(AvgPool {
            window: pool_window(kernel, stride, input)?,
        })
    }
}

impl Layer for AvgPool {
    fn output_shape(&self) -> Shape {
        pooled(&self.window)
    }

    fn forward(
        &self,
        _params: ArrayView1<'_, f32>,
        input: ArrayView2<'_, f32>,
        _keep: bool,
    ) -> Forward {
        Forward::plain(kernels::avg_pool(input, &self.window))
    }

    fn backward(
        &self,
        _ctx: BackwardContext<'_>,
        d: Array2<f32>,
        _input_gradient: bool,
    ) -> Backward {
        Backward {
            input_gradient: Some(kernels::avg_pool_backward(d.view(), &self.window)),
            delta: None,
        }
    }
}
