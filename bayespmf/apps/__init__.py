"""The application layer: what is built on the library, imported on demand.

``import bayespmf`` loads none of these modules (``tests/test_layering.py`` checks it),
and no module outside this package imports them.

* :mod:`~bayespmf.apps.tasks`: classification and rating prediction under the CNMF
  paper's protocol, with the baselines in the same loop;
* :mod:`~bayespmf.apps.baselines`: scikit-learn classifiers and biased matrix
  factorization, the baselines of the tasks;
* :mod:`~bayespmf.apps.spec`: model specifications (TOML), parsed and validated;
* :mod:`~bayespmf.apps.run`: carry out a specification and write its results;
* :mod:`~bayespmf.apps.cli`: the ``bayespmf`` command.
"""
