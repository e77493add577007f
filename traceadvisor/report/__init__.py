"""Report writers: they only render an AnalysisResult / Comparison they are given."""
