"""``tf.debug``: gradient checks, the origin of NaNs and Infs, why a gradient is missing,
gradient hooks, and the instruments of a training cockpit (curvature, gradient noise, the
loss landscape). Nothing here costs anything until it is used."""
from .explain import Explanation, InputExplanation, explain_gradient
from .gradcheck import (Culprit, GradCheckError, GradCheckReport, InputCheck,
                        check_custom_grad, check_grads)
from .hooks import HookHandle, callback, on_gradient, register_hook
from ..errors import GraphvizError, MissingDependencyError
from .graph import Graph, GraphNode, graph
from .leaks import LeakReport, LeakSite, LeakTracker, track_leaks
from .profile import KernelInfo, ProfileInfo, profile, time
from .monitor import Flag, GradientMonitor, History, monitor
from .plots import (plot_cockpit, plot_example_norms, plot_grad_flow, plot_grad_norms,
                    plot_histograms, plot_loss)
from .report import report
from . import numerics
from .numerics import (Finding, NumericsError, NumericsWarning, check_numerics,
                       disable_debug_mode, enable_debug_mode)
from .per_example import GradientNoise, gradient_noise, per_example_grad_norms, worst_examples
from .curvature import (HessianEigen, HessianSpectrum, HessianTrace, hessian_eigenvalues,
                        hessian_spectrum, hessian_trace)
from .landscape import LossLandscape, loss_landscape

numerics.debug_mode_from_environment()      # FLOWGRAD_DEBUG=1 python train.py

__all__ = ["Culprit", "Explanation", "Finding", "GradCheckError", "GradCheckReport",
           "HookHandle", "InputCheck", "InputExplanation", "NumericsError", "NumericsWarning",
           "check_custom_grad", "check_grads", "check_numerics", "disable_debug_mode",
           "enable_debug_mode", "explain_gradient", "on_gradient", "register_hook"]
__all__ += ["callback"]
__all__ += ["Graph", "GraphNode", "GraphvizError", "KernelInfo", "LeakReport", "LeakSite",
            "LeakTracker", "ProfileInfo", "graph", "profile", "time", "track_leaks"]
__all__ += ["Flag", "GradientMonitor", "History", "MissingDependencyError", "monitor",
            "plot_grad_flow", "plot_grad_norms", "plot_histograms", "plot_loss", "report"]
__all__ += ["per_example_grad_norms", "plot_cockpit", "plot_example_norms", "worst_examples"]

from .diagnose import CAUSES, Diagnosis, TrainingFinding, diagnose  # noqa: E402
__all__ += ["CAUSES", "Diagnosis", "TrainingFinding", "diagnose"]
__all__ += ["GradientNoise", "HessianEigen", "HessianSpectrum", "HessianTrace", "LossLandscape",
            "gradient_noise", "hessian_eigenvalues", "hessian_spectrum", "hessian_trace",
            "loss_landscape"]
