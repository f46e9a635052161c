"""Pure computational kernels: NumPy references, numba loops and PyTensor graph builders.

Arrays in, arrays out. The fit functions of :mod:`bayespmf.fit` own the loops
(:func:`bayespmf.fit.iterate`), tolerances, validation and warnings on top of these; the
estimator classes of :mod:`bayespmf.estimators` are thin scikit-learn classes over them.
"""
