"""hlo.backends"""
