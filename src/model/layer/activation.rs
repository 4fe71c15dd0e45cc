//! Element-wise activation layers (room: `model`).
//!
//! The backward pass needs only the layer's output (relu' = \[y > 0\], tanh' = 1 − y²,
//! sigmoid' = y (1 − y)), so the forward pass may run in place on its input when nothing else
//! needs that input. Kernels in [`crate::model::kernels`].

use ndarray::{Array2, ArrayView1, ArrayView2};

use super::{Backward, BackwardContext, Forward, Layer, Shape};
use crate::model::kernels;
use crate::model::spec::Activation;

/// An activation applied to every feature.
#[derive(Debug, Clone, PartialEq)]
pub struct Act {
    pub function: Activation,
    /// The input's (and output's) shape.
    pub shape: Shape,
}

impl Layer for Act {
    fn output_shape(&self) -> Shape {
        self.shape
    }

    fn keeps_output(&self) -> bool {
        true
    }

    fn forward(
        &self,
        _params: ArrayView1<'_, f32>,
        input: ArrayView2<'_, f32>,
        _keep: bool,
    ) -> Forward {
        let mut out = input.to_owned();
        kernels::activate(self.function, &mut out);
        Forward::plain(out)
    }

    fn forward_in_place(&self, x: &mut Array2<f32>) -> bool {
        kernels::activate(self.function, x);
        true
    }

    fn backward(
        &self,
        ctx: BackwardContext<'_>,
        mut d: Array2<f32>,
        _input_gradient: bool,
    ) -> Backward {
        kernels::activation_backward(self.function, ctx.output, &mut d);
        Backward {
            input_gradient: Some(d),
            delta: None,
        }
    }
}
