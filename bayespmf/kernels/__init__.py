"""Pure computational kernels: NumPy references and PyTensor graph builders.

Arrays in, arrays out. Estimator classes in :mod:`bayespmf.estimators` own the loops,
tolerances and validation on top of these.
"""
