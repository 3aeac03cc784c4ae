"""hlo.runtime"""
