"""Write ``posterior_bayespmf_0.1_arviz_0.23.nc``: a posterior saved by bayespmf 0.1.

Run once with bayespmf 0.1 on its stack (Python 3.11, PyMC 5.28, ArviZ 0.23.4); the
file is test data for ``tests/test_io.py``, which checks that bayespmf on ArviZ 1 still
loads posteriors saved that way. Not run by the suite.
"""

from bayespmf import LatentClassPMF, datasets, io
from bayespmf.models import latent_class_model, sample

sim, _ = datasets.make_latent_class(
    60, n_categories=[2, 3, 2], n_components=2, observed_prob=0.8, random_state=0
)
est = LatentClassPMF(n_components=2, random_state=0).fit(sim)
idata = sample(
    latent_class_model(sim, n_components=2),
    init=est,
    draws=20,
    tune=20,
    chains=2,
    random_seed=0,
    progressbar=False,
)
io.save(idata, "posterior_bayespmf_0.1_arviz_0.23.nc")
