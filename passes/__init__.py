"""hlo.passes"""
