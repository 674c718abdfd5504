# bench: rules added by the owner of this area
