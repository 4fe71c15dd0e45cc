//! The layout permutations between the data's channel-major images and the model's channels-last
//! ones (room: `model`; see [`crate::model::kernels`] for the convention).
//!
//! - [`ToChannelsLast`]: inserted by the model before its first layer when the input is an image
//!   with more than one channel.
//! - [`Flatten`]: channels-last image to a channel-major vector (PyTorch's flatten order).

use ndarray::{Array2, ArrayView1, ArrayView2};

use super::{Backward, BackwardContext, Forward, Layer, Shape};
use crate::model::kernels;

/// Channel-major `[C, H, W]` input image to channels-last.
#[derive(Debug, Clone, PartialEq)]
pub struct ToChannelsLast {
    pub c: usize,
    pub h: usize,
    pub w: usize,
}

impl Layer for ToChannelsLast {
    fn output_shape(&self) -> Shape {
        Shape::Image {
            c: self.c,
            h: self.h,
            w: self.w,
        }
    }

    fn forward(
        &self,
        _params: ArrayView1<'_, f32>,
        input: ArrayView2<'_, f32>,
        _keep: bool,
    ) -> Forward {
        Forward::plain(kernels::chw_to_hwc(input, self.c, self.h, self.w))
    }

    fn backward(
        &self,
        _ctx: BackwardContext<'_>,
        d: Array2<f32>,
        _input_gradient: bool,
    ) -> Backward {
        Backward {
            input_gradient: Some(kernels::hwc_to_chw(d.view(), self.c, self.h, self.w)),
            delta: None,
        }
    }
}

/// Channels-last image to a channel-major vector.
#[derive(Debug, Clone, PartialEq)]
pub struct Flatten {
    pub c: usize,
    pub h: usize,
    pub w: usize,
}

impl Layer for Flatten {
    fn output_shape(&self) -> Shape {
        Shape::Flat(self.c * self.h * self.w)
    }

    fn forward(
        &self,
        _params: ArrayView1<'_, f32>,
        input: ArrayView2<'_, f32>,
        _keep: bool,
    ) -> Forward {
        Forward::plain(kernels::hwc_to_chw(input, self.c, self.h, self.w))
    }

    fn backward(
        &self,
        _ctx: BackwardContext<'_>,
        d: Array2<f32>,
        _input_gradient: bool,
    ) -> Backward {
        Backward {
            input_gradient: Some(kernels::chw_to_hwc(d.view(), self.c, self.h, self.w)),
            delta: None,
        }
    }
}
